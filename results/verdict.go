package results

// Verdict values: a row judged against the plan's expectations.
const (
	VerdictPass    = "pass"
	VerdictFail    = "fail"
	VerdictUnknown = "unknown"
)

// Search values: a row of a knee search.
const (
	SearchProbe = "probe"
	SearchKnee  = "knee"
)
