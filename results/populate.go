package results

// PopulateReaders is how many readers node's populate runs at once, each
// faulting its own range of the file in (node/region). Each range gets
// the kernel's sequential readahead, so about this many readahead windows
// are in flight: on the 6.1 test guest's NVMe, 8 readers over a 256 MiB
// file carried 1.7 to 2 times what one did, and 16 no more than 8
// (docs/rdma.md#populate). The fio_matched peer runs as many jobs, so
// populate is compared with fio reading the same way.
const PopulateReaders = 8
