# iperf 3.12 (cJSON 1.7.15), made by fixtures_test.go on 2026-12-03
iperf3 -s -1 -p 25202 -B 127.0.0.1
iperf3 -c 127.0.0.1 -p 25202 -R -l 65536 -P 2 -n 2147483648 -J
