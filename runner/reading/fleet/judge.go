package fleet

// The judgment of a pool's links, from their rows.
//
// A link is one ordered pair: the client host reads from the server host.
// Its figure is the median bandwidth of its ok rows (its repetitions).
//
//   - Slow link: its median is below the threshold. The threshold is the
//     one the user gives (JudgeOptions.SlowBelow, summary --slow-below),
//     else the lower
//     of 0.8 × the median of all links and that median − 3 × their median
//     absolute deviation (MAD, unscaled), so a noisy fabric does not make
//     its own slow links.
//   - Suspect host: more than half of its links as server, or more than
//     half of its links as client, are slow (a NIC slow in one direction
//     is slow in one role); and its slow links reach at least two other
//     hosts. Slow links that all run between one host and one other host
//     are explained as well by that one link (a cable or a switch port, in
//     one direction or both), so then neither end is named: with two hosts
//     no host is ever suspect, and one slow link makes no suspect.
//   - Unreachable host: its first connection failure names it (the row's
//     error starts with the role and the host, as "client (HOST): …", and
//     says the connection failed), and no row of it after that one is ok:
//     a host dead from the start, or one that died mid-sweep. Its links
//     have no figure and count for no one.

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"strings"

	"rdmasweep/internal/stat"
)

// Sample is one row of a pool sweep, as the judgment reads it.
type Sample struct {
	Server, Client string  // the hosts, as the plan or the allocation names them
	MBs            float64 // bandwidth_mb_s; read only when OK
	OK             bool
	Error          string // the row's error, when not OK
}

// JudgeOptions change how links are judged.
type JudgeOptions struct {
	// SlowBelow is the bandwidth in MB/s below which a link is slow; 0 is
	// none, and the threshold then comes from the links themselves. It is
	// not the plan's expect, which judges each row (runner/reading/verdict).
	SlowBelow float64
}

// Link is one ordered pair's figures.
type Link struct {
	Server string `json:"server"`
	Client string `json:"client"`
	Rows   int    `json:"rows"`
	OK     int    `json:"ok"`
	MBs    MBs    `json:"median_mb_s"` // NaN (null) when no row is ok
	Ratio  Ratio  `json:"ratio"`       // MBs ÷ the median of all links
	Slow   bool   `json:"slow"`
	Error  string `json:"error,omitempty"` // the first failed row's
}

// Measured reports whether any row of the link was ok.
func (l Link) Measured() bool { return l.OK > 0 }

// Suspect is a host judged bad: its slow links and all its measured ones.
type Suspect struct {
	Host        string `json:"host"`
	SlowLinks   int    `json:"slow_links"`
	Links       int    `json:"links"`
	MedianRatio Ratio  `json:"median_ratio"` // median of its links' Ratio
	Slow        []Link `json:"-"`            // its slow links, for the text report
}

// Unreachable is a host the runner lost.
type Unreachable struct {
	Host   string `json:"host"`
	Failed int    `json:"failed_rows"` // its rows from the first connection failure on
	Error  string `json:"error"`       // that failure
}

// Judgment is what a pool's rows say.
type Judgment struct {
	Hosts       []string      `json:"hosts"`
	MedianMBs   MBs           `json:"median_mb_s"` // of all measured links
	MADMBs      MBs           `json:"mad_mb_s"`
	Threshold   MBs           `json:"threshold_mb_s"`
	Rule        string        `json:"threshold_rule"` // which bound set Threshold
	Links       []Link        `json:"links"`
	SlowLinks   []Link        `json:"slow_links"`
	Suspects    []Suspect     `json:"suspects"`
	Unreachable []Unreachable `json:"unreachable"`
}

// Judge judges the samples of one point of a pool sweep.
func Judge(samples []Sample, o JudgeOptions) Judgment {
	// Empty lists, not nil: the JSON has [] where nothing was found.
	j := Judgment{Links: links(samples), Hosts: hostsOf(samples), SlowLinks: []Link{}}
	var meds []float64
	for _, l := range j.Links {
		if l.Measured() {
			meds = append(meds, float64(l.MBs))
		}
	}
	med, spread := stat.Median(meds), stat.MAD(meds)
	th, rule := threshold(med, spread, o.SlowBelow)
	j.MedianMBs, j.MADMBs, j.Threshold, j.Rule = MBs(med), MBs(spread), MBs(th), rule
	for i := range j.Links {
		l := &j.Links[i]
		l.Ratio = Ratio(float64(l.MBs) / med)
		l.Slow = l.Measured() && float64(l.MBs) < th
		if l.Slow {
			j.SlowLinks = append(j.SlowLinks, *l)
		}
	}
	j.Suspects = append([]Suspect{}, suspects(j.Hosts, j.Links)...)
	j.Unreachable = append([]Unreachable{}, unreachable(samples)...)
	return j
}

// threshold is the bandwidth below which a link is slow, and its rule.
func threshold(med, mad, slowBelow float64) (float64, string) {
	if slowBelow > 0 {
		return slowBelow, "slow-below"
	}
	if byMAD := med - 3*mad; byMAD < 0.8*med {
		return byMAD, "median - 3 × MAD"
	}
	return 0.8 * med, "0.8 × median"
}

// links groups the samples by ordered pair, ordered by server, then client.
func links(samples []Sample) []Link {
	type acc struct {
		Link
		mbs []float64
	}
	var out []*acc
	index := map[[2]string]*acc{}
	for _, s := range samples {
		k := [2]string{s.Server, s.Client}
		a := index[k]
		if a == nil {
			a = &acc{Link: Link{Server: s.Server, Client: s.Client}}
			index[k] = a
			out = append(out, a)
		}
		a.Rows++
		if s.OK {
			a.OK++
			a.mbs = append(a.mbs, s.MBs)
		} else if a.Error == "" {
			a.Error = s.Error
		}
	}
	ls := make([]Link, len(out))
	for i, a := range out {
		ls[i] = a.Link
		ls[i].MBs = MBs(stat.Median(a.mbs))
	}
	slices.SortStableFunc(ls, func(a, b Link) int {
		return cmp.Or(naturalCompare(a.Server, b.Server), naturalCompare(a.Client, b.Client))
	})
	return ls
}

// suspects applies the suspect rule (see the top of this file) to every
// host, in host order.
func suspects(hosts []string, links []Link) []Suspect {
	var out []Suspect
	for _, h := range hosts {
		var asServer, asClient, slowServer, slowClient int
		var ratios []float64
		var slow []Link
		partners := map[string]bool{}
		for _, l := range links {
			if !l.Measured() || (l.Server != h && l.Client != h) {
				continue
			}
			ratios = append(ratios, float64(l.Ratio))
			other := l.Client
			if l.Server == h {
				asServer++
			} else {
				asClient++
				other = l.Server
			}
			if !l.Slow {
				continue
			}
			slow = append(slow, l)
			partners[other] = true
			if l.Server == h {
				slowServer++
			} else {
				slowClient++
			}
		}
		most := 2*slowServer > asServer || 2*slowClient > asClient
		if !most || len(partners) < 2 {
			continue
		}
		out = append(out, Suspect{Host: h, SlowLinks: len(slow), Links: len(ratios), MedianRatio: Ratio(stat.Median(ratios)), Slow: slow})
	}
	return out
}

// unreachable applies the unreachable rule (see the top of this file);
// the samples are in the order they ran.
func unreachable(samples []Sample) []Unreachable {
	first := map[string]int{} // host → index of its first connection failure
	for i, s := range samples {
		if s.OK {
			continue
		}
		if h, ok := ConnectionFailure(s); ok {
			if _, seen := first[h]; !seen {
				first[h] = i
			}
		}
	}
	var out []Unreachable
	for _, h := range hostsOf(samples) {
		at, ok := first[h]
		if !ok {
			continue
		}
		u := Unreachable{Host: h, Error: samples[at].Error}
		for _, s := range samples[at:] {
			if s.Server != h && s.Client != h {
				continue
			}
			if s.OK {
				u.Failed = -1
				break
			}
			u.Failed++
		}
		if u.Failed > 0 {
			out = append(out, u)
		}
	}
	return out
}

// connectionWords are what a failed row's error says when the runner could
// not reach a host or lost it: the SSH layer's and the kernel's words.
var connectionWords = []string{
	"connect:", "connection refused", "connection reset", "connection lost", "lost connection",
	"no route to host", "host is unreachable", "network is unreachable", "i/o timeout",
	"handshake", "broken pipe", "eof", "unreachable", "timed out",
}

// ConnectionFailure returns the host a failed sample's error blames for a
// lost or refused connection: the error starts with "ROLE (HOST)", where
// HOST is the sample's host in that role, and says the connection failed.
func ConnectionFailure(s Sample) (string, bool) {
	var host string
	switch {
	case strings.HasPrefix(s.Error, "server ("+s.Server+")"):
		host = s.Server
	case strings.HasPrefix(s.Error, "client ("+s.Client+")"):
		host = s.Client
	default:
		return "", false
	}
	msg := strings.ToLower(s.Error)
	for _, w := range connectionWords {
		if strings.Contains(msg, w) {
			return host, true
		}
	}
	return "", false
}

// hostsOf is every host of the samples, in natural order (h2 before h10).
func hostsOf(samples []Sample) []string {
	seen := map[string]bool{}
	var hs []string
	for _, s := range samples {
		for _, h := range []string{s.Server, s.Client} {
			if !seen[h] {
				seen[h] = true
				hs = append(hs, h)
			}
		}
	}
	slices.SortFunc(hs, naturalCompare)
	return hs
}

// naturalCompare orders strings with their runs of digits compared as
// numbers.
func naturalCompare(a, b string) int {
	for a != "" && b != "" {
		da, db := digits(a), digits(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if c := cmp.Or(cmp.Compare(len(na), len(nb)), strings.Compare(na, nb)); c != 0 {
				return c
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return cmp.Compare(a[0], b[0])
		}
		a, b = a[1:], b[1:]
	}
	return cmp.Compare(len(a), len(b))
}

func digits(s string) int {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

// MBs is a bandwidth in MB/s; in JSON it has one decimal, and NaN (no
// figure) is null.
type MBs float64

func (x MBs) MarshalJSON() ([]byte, error) { return figureJSON(float64(x), 1), nil }

// Ratio is a bandwidth over the median of all links; in JSON it has three
// decimals, and NaN is null.
type Ratio float64

func (x Ratio) MarshalJSON() ([]byte, error) { return figureJSON(float64(x), 3), nil }

func figureJSON(x float64, prec int) []byte {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return []byte("null")
	}
	return strconv.AppendFloat(nil, x, 'f', prec, 64)
}
