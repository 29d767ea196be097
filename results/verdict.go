package results

// Verdict values: a row judged against the plan's expectations.
const (
	VerdictPass    = "pass"
	VerdictFail    = "fail"
	VerdictUnknown = "unknown"
	// VerdictCold: a cold row that is not proven cold (Row.NotCold),
	// whatever its expectations say.
	VerdictCold = "cold"
)

// Search values: a row of a knee search.
const (
	SearchProbe = "probe"
	SearchKnee  = "knee"
)
