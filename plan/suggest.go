package plan

// Suggest is " (did you mean x?)" for the near miss of name among known,
// else the list of what is known: the plan's own hint, for other readers
// of names the schema declares (runner compare's --metric and --by).
func Suggest(name string, known []string) string { return suggest(name, known) }

// synonyms are names users bring from other tools (fio, perftest) or from
// the fabric's name, and what the plan calls them. Their edit distance is
// too far for suggest's near-miss search.
var synonyms = map[string]string{
	"roce":       "rdma",
	"ib":         "rdma",
	"infiniband": "rdma",
	"iodepth":    "queue_depth",
	"bs":         "block_size",
	"size":       "file_size",
}
