# fio-3.33, made by fixtures_test.go on 2026-12-03
fio --name=rdmasweep --filename=/srv/rdmasweep/region.dat --readonly --ioengine=io_uring --rw=randread --bs=4096 --iodepth=8 --size=268435456 --io_size=67108864 --lat_percentiles=1 --output-format=json
