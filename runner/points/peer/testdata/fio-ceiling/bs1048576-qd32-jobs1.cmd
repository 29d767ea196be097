# fio-3.33, made by fixtures_test.go on 2026-12-06
fio --name=ceiling --filename=/srv/rdmasweep/region.dat --readonly --direct=1 --ioengine=io_uring --rw=read --bs=1048576 --iodepth=32 --numjobs=1 --size=16777216 --offset_increment=16777216 --group_reporting --output-format=json
