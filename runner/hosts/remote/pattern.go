package remote

// sshPattern matches s against an OpenSSH pattern (match_pattern in
// OpenSSH's match.c): '*' matches any run of characters, '?' any one,
// and everything else, '[' and ']' included, only itself. filepath.Match
// would read "[127.0.0.1]:2222", the known_hosts form of a host on another
// port, as a character class.
func sshPattern(pattern, s string) bool {
	// Iterative wildcard match with one backtrack point, as for globs.
	p, i := 0, 0
	star, mark := -1, 0
	for i < len(s) {
		switch {
		case p < len(pattern) && (pattern[p] == '?' || pattern[p] == s[i]):
			p++
			i++
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, i
			p++
		case star >= 0:
			p, mark = star+1, mark+1
			i = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}
