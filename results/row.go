package results

// Columns is the CSV header, in order. It is frozen: notebooks and scripts
// index these names, so later work fills columns but never adds, removes or
// reorders them. A test pins Row's gocsv tags to this list.
var Columns = []string{
	"run_id", "plan", "point_key", "repetition", "started_at", "status", "error", "transport", "server_host", "client_host",
	"file_size_bytes", "block_size_bytes", "queue_depth", "qps", "pattern", "cache", "registration", "total_bytes", "duration_s", "warmup_s",
	"bytes", "seconds", "bandwidth_mb_s", "iops", "lat_avg_us", "lat_p50_us", "lat_p99_us", "lat_p999_us", "lat_max_us",
	"verified", "registration_s", "registration_mb_s", "cached_fraction",
}

// Status values.
const (
	StatusOK     = "ok"
	StatusFailed = "failed"
)

// Row is one run of one point. Pointer fields are empty in the CSV when nil:
// measurements of a failed run, registration figures of tcp.
type Row struct {
	RunID      string `csv:"run_id"`
	Plan       string `csv:"plan"`
	PointKey   string `csv:"point_key"`
	Repetition int    `csv:"repetition"` // from 1
	StartedAt  string `csv:"started_at"` // RFC 3339, UTC
	Status     string `csv:"status"`     // ok | failed
	Error      string `csv:"error"`      // one line; the full stderr is in the log file
	Transport  string `csv:"transport"`
	ServerHost string `csv:"server_host"`
	ClientHost string `csv:"client_host"`

	FileSizeBytes  int64   `csv:"file_size_bytes"`
	BlockSizeBytes int64   `csv:"block_size_bytes"`
	QueueDepth     int     `csv:"queue_depth"`
	QPs            int     `csv:"qps"`
	Pattern        string  `csv:"pattern"`
	Cache          string  `csv:"cache"`
	Registration   string  `csv:"registration"` // empty for tcp
	TotalBytes     int64   `csv:"total_bytes"`
	DurationS      float64 `csv:"duration_s"`
	WarmupS        float64 `csv:"warmup_s"`

	Bytes        *int64   `csv:"bytes"`
	Seconds      *float64 `csv:"seconds"`
	BandwidthMBs *float64 `csv:"bandwidth_mb_s"`
	IOPS         *float64 `csv:"iops"`
	LatAvgUs     *float64 `csv:"lat_avg_us"`
	LatP50Us     *float64 `csv:"lat_p50_us"`
	LatP99Us     *float64 `csv:"lat_p99_us"`
	LatP999Us    *float64 `csv:"lat_p999_us"`
	LatMaxUs     *float64 `csv:"lat_max_us"`

	Verified        *bool    `csv:"verified"`
	RegistrationS   *float64 `csv:"registration_s"`
	RegistrationMBs *float64 `csv:"registration_mb_s"`
	CachedFraction  *float64 `csv:"cached_fraction"`
}

// SetResult copies a client's measurement into the row.
func (r *Row) SetResult(res *Result) {
	r.Bytes = &res.Bytes
	r.Seconds = &res.Seconds
	r.BandwidthMBs = &res.BandwidthMBs
	r.IOPS = &res.IOPS
	r.LatAvgUs = &res.LatAvgUs
	r.LatP50Us = &res.LatP50Us
	r.LatP99Us = &res.LatP99Us
	r.LatP999Us = &res.LatP999Us
	r.LatMaxUs = &res.LatMaxUs
	r.Verified = &res.Verified
}

// SetReady copies the server's preparation figures into the row.
func (r *Row) SetReady(rd *Ready) {
	r.RegistrationS = rd.RegistrationS
	r.RegistrationMBs = rd.RegistrationMBs
	r.CachedFraction = &rd.CachedFraction
}
