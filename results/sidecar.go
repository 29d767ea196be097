package results

// SidecarSuffix names the sidecar node writes beside a data file it made:
// FILE.rdmasweep. node keeps what it wrote there; the runner only asks
// whether it exists, since a file without one is the user's (check says
// so, and clean keeps it).
const SidecarSuffix = ".rdmasweep"
