package fleet

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"

	"rdmasweep/results"
	"rdmasweep/results/param"
)

// Point is the judgment of one point of a pool sweep: its pairs' rows,
// over every repetition and run given.
type Point struct {
	// Point names the point by the parameters that differ between the
	// points of the CSV ("block_size=1MiB"); empty when there is one.
	Point string `json:"point,omitempty"`
	Judgment
}

// IsPoolRow reports whether a row is a pool sweep's: it has a round.
func IsPoolRow(r results.Row) bool { return r.Round != nil }

// FromRows judges the pool rows among rows (IsPoolRow), one Point per
// distinct set of parameter cells, in order of first appearance.
func FromRows(rows []results.Row, o JudgeOptions) []Point {
	type group struct {
		cells   map[string]string
		samples []Sample
	}
	var groups []*group
	index := map[string]*group{}
	for _, r := range rows {
		if !IsPoolRow(r) || r.Scope == results.ScopeAggregate {
			continue
		}
		k := cellsKey(r)
		g := index[k]
		if g == nil {
			g = &group{cells: r.Params}
			index[k] = g
			groups = append(groups, g)
		}
		s := Sample{Server: r.ServerHost, Client: r.ClientHost, OK: r.Status == results.StatusOK && r.BandwidthMBs != nil, Error: r.Error}
		if s.OK {
			s.MBs = *r.BandwidthMBs
		}
		g.samples = append(g.samples, s)
	}
	all := make([]map[string]string, len(groups))
	for i, g := range groups {
		all[i] = g.cells
	}
	out := make([]Point, len(groups))
	for i, g := range groups {
		out[i] = Point{Judgment: Judge(g.samples, o)}
		if len(groups) > 1 {
			out[i].Point = differing(all, i)
		}
	}
	return out
}

// cellsKey is a row's parameter cells, in the schema's order, but for
// clients: a pool row's clients is how many pairs read in its round, fewer
// in a round that ran again without a failed pair, and the same point.
func cellsKey(r results.Row) string {
	var b strings.Builder
	b.WriteString(r.Plan)
	for _, p := range results.Params() {
		if p.Name != roundParam {
			b.WriteString("\x00" + r.Params[p.Name])
		}
	}
	return b.String()
}

// roundParam is the parameter a round sets, which says nothing of the
// point (see cellsKey).
var roundParam = param.Clients.String()

// differing names the point whose cells are all[i] by the parameters
// whose cells differ among all.
func differing(all []map[string]string, i int) string {
	var parts []string
	for _, p := range results.Params() {
		if p.Name == roundParam {
			continue
		}
		for _, c := range all[1:] {
			if c[p.Name] != all[0][p.Name] {
				parts = append(parts, p.Name+"="+p.Display(all[i][p.Name]))
				break
			}
		}
	}
	return strings.Join(parts, " ")
}

// WriteJSON writes each point's judgment as an indented JSON object, one
// after another (one object for a CSV of one point).
func WriteJSON(w io.Writer, points []Point) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	for _, p := range points {
		if err := enc.Encode(p); err != nil {
			return err
		}
	}
	return nil
}

// WriteText prints each point's matrix, slow links, suspects and
// unreachable hosts, for people.
func WriteText(w io.Writer, points []Point) error {
	for i, p := range points {
		if i > 0 {
			fmt.Fprintln(w)
		}
		if p.Point != "" {
			fmt.Fprintf(w, "point %s\n", p.Point)
		}
		if err := writeMatrix(w, p.Judgment); err != nil {
			return err
		}
		if err := writeFindings(w, p.Judgment); err != nil {
			return err
		}
	}
	return nil
}

// writeMatrix prints the server × client matrix of median MB/s: "-" on
// the diagonal, "x" for a link whose every row failed, nothing for a pair
// the topology does not measure, and "*" after a slow link's figure.
func writeMatrix(w io.Writer, j Judgment) error {
	cell := map[[2]string]Link{}
	for _, l := range j.Links {
		cell[[2]string{l.Server, l.Client}] = l
	}
	fmt.Fprintln(w, "median MB/s of each link: the client (column) reads from the server (row); * slow, x failed")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "server\\client\t"+strings.Join(j.Hosts, "\t")+"\t")
	for _, s := range j.Hosts {
		cells := []string{s}
		for _, c := range j.Hosts {
			l, ok := cell[[2]string{s, c}]
			switch {
			case s == c:
				cells = append(cells, "-")
			case !ok:
				cells = append(cells, "")
			case !l.Measured():
				cells = append(cells, "x")
			case l.Slow:
				cells = append(cells, mbs(l.MBs)+"*")
			default:
				cells = append(cells, mbs(l.MBs)+" ")
			}
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	measured := 0
	for _, l := range j.Links {
		if l.Measured() {
			measured++
		}
	}
	fmt.Fprintf(w, "median of %d links %s MB/s (MAD %s); slow below %s MB/s (%s)\n",
		measured, mbs(j.MedianMBs), mbs(j.MADMBs), mbs(j.Threshold), j.Rule)
	return nil
}

func writeFindings(w io.Writer, j Judgment) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "\nslow links: %d\n", len(j.SlowLinks))
	for _, l := range j.SlowLinks {
		fmt.Fprintf(tw, "  %s → %s\t%s MB/s\t%s × median\n", l.Server, l.Client, mbs(l.MBs), ratio(l.Ratio))
	}
	fmt.Fprintf(tw, "suspects: %d\n", len(j.Suspects))
	for _, s := range j.Suspects {
		fmt.Fprintf(tw, "  %s\t%d of %d links slow\tat %s × the median link\n", s.Host, s.SlowLinks, s.Links, ratio(s.MedianRatio))
		for _, l := range s.Slow {
			fmt.Fprintf(tw, "    %s → %s\t%s MB/s\t%s × median\n", l.Server, l.Client, mbs(l.MBs), ratio(l.Ratio))
		}
	}
	if once := readOnce(j.Suspects); once > 0 {
		fmt.Fprintf(tw, "  (%d of these slow links are one read each: a host busy for a second looks the same; repeat: 3 reads each link three times, a sweep apart, and judges the median)\n", once)
	}
	fmt.Fprintf(tw, "unreachable: %d\n", len(j.Unreachable))
	for _, u := range j.Unreachable {
		fmt.Fprintf(tw, "  %s\t%d rows failed\t%s\n", u.Host, u.Failed, u.Error)
	}
	return tw.Flush()
}

func mbs(x MBs) string {
	if math.IsNaN(float64(x)) {
		return "-"
	}
	return strconv.FormatFloat(float64(x), 'f', 1, 64)
}

func ratio(x Ratio) string {
	if math.IsNaN(float64(x)) {
		return "-"
	}
	return strconv.FormatFloat(float64(x), 'f', 2, 64)
}

// readOnce counts the suspects' slow links whose figure is one read (one
// ok row), each link once though both its hosts are suspect: a transient,
// such as a host descheduled for a second, makes those slow in a run of
// one repetition, and their host suspect, as well as a bad NIC does.
// Repetitions run a whole sweep apart, so with three a transient moves one
// of each link's reads, not its median.
func readOnce(suspects []Suspect) int {
	once := map[[2]string]bool{}
	for _, s := range suspects {
		for _, l := range s.Slow {
			if l.OK == 1 {
				once[[2]string{l.Server, l.Client}] = true
			}
		}
	}
	return len(once)
}
