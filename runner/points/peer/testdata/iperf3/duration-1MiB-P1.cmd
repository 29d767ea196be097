# iperf 3.12 (cJSON 1.7.15), made by fixtures_test.go on 2026-12-03
iperf3 -s -1 -p 25201 -B 127.0.0.1
iperf3 -c 127.0.0.1 -p 25201 -R -l 1048576 -P 1 -t 3 -O 1 -J
