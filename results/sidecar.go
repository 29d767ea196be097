package results

// SidecarSuffix names the sidecar node writes beside a data file it made:
// FILE.rdmasweep. node keeps what it wrote there; the runner only asks
// whether it exists, since a file without one is the user's (check says
// so, and clean keeps it).
const SidecarSuffix = ".rdmasweep"

// NVMeOFRecords is the directory where node nvmet and node nvmeof-read
// record what they make (node/nvmeof); runner clean has the host's node
// remove what a killed one left there (node nvmeof-clean).
const NVMeOFRecords = "/run/rdmasweep/nvmeof"
