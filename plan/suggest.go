package plan

// Suggest is " (did you mean x?)" for the near miss of name among known,
// else the list of what is known: the plan's own hint, for other readers
// of names the schema declares (runner compare's --metric and --by).
func Suggest(name string, known []string) string { return suggest(name, known) }
