# fio-3.33, made by fixtures_test.go on 2026-12-03
fio --name=rdmasweep --filename=/srv/rdmasweep/region.dat --readonly --ioengine=io_uring --rw=read --bs=1048576 --iodepth=16 --size=268435456 --runtime=3000ms --time_based --ramp_time=1000ms --invalidate=0 --lat_percentiles=1 --output-format=json
