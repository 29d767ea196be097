# perftest 4.5+0.17-1 (ib_read_bw --version: Version: 6.06); Debian 12 guest, soft-RoCE rxe0 under qemu TCG, 2 CPUs, made by fixtures_test.go on 2026-12-03
ib_read_bw -s 65536 -q 2 -t 16 -d rxe0 -x 1 -p 18600 -n 256 --out_json --out_json_file=/tmp/ib_read_bw.server.json
ib_read_bw -s 65536 -q 2 -t 16 -d rxe0 -x 1 -p 18600 -n 256 --out_json --out_json_file=/tmp/ib_read_bw.client.json 10.0.2.15
