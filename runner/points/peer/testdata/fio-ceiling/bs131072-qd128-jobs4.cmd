# fio-3.33, made by fixtures_test.go on 2026-12-06
fio --name=ceiling --filename=/srv/rdmasweep/region.dat --readonly --direct=1 --ioengine=io_uring --rw=read --bs=131072 --iodepth=128 --numjobs=4 --size=4194304 --offset_increment=4194304 --group_reporting --output-format=json
