package tcp

// The open loop (Workload.Rate > 0). Rules:
//   - Each read has a due time from its Schedule. It is posted at or after
//     that time, never before, and only while fewer than QueueDepth reads
//     are in flight.
//   - Service latency runs from the post to the reply's last byte, as in
//     the closed loop; response latency from the due time to the same
//     instant, so a stall that holds reads back shows in it.
//   - A read is held back when it fell due while QueueDepth reads were in
//     flight: the window was full when the sender woke for it, or it fell
//     due before the window last opened.
//
// Two goroutines, unlike the closed loop: the sender sleeps until each due
// time whatever the replies are doing, and the receiver reads replies in
// order. slots is the window (a read holds a place from its post until
// its reply is read), and posts carries each read's due and post times to
// the receiver, which also orders them before it reads them.

import (
	"bufio"
	"context"
	"fmt"
	"sync"
	"time"

	"rdmasweep/node/workload"
	"rdmasweep/results"
)

// openPost is one posted read, as the receiver needs it.
type openPost struct {
	seq         int64
	due, posted time.Duration // since the phase's start
	heldBack    bool
}

// openLoop is one open-loop phase's shared state.
type openLoop struct {
	p     *phase
	sched *workload.Schedule
	start time.Time
	slots chan struct{}
	posts chan openPost
	quit  chan struct{}
	once  sync.Once
	err   error // the first failure, set once before quit closes
}

// fail records the phase's first failure and stops both sides: quit ends
// the sender's waits, and a past deadline the receiver's read and the
// sender's write.
func (o *openLoop) fail(err error) {
	o.once.Do(func() {
		o.err = err
		close(o.quit)
		o.p.c.conn.SetDeadline(time.Unix(1, 0))
	})
}

// runOpen runs one open-loop phase of sched's reads and waits for every
// reply. Service latencies go to h, response latencies to resp, and
// completions to intervals of Workload.Interval, when h is not nil (the
// measured phase).
func (p *phase) runOpen(ctx context.Context, sched *workload.Schedule, h, resp *results.Histogram) (phaseResult, int64, error) {
	qd := p.w.QueueDepth
	o := &openLoop{
		p: p, sched: sched, start: time.Now(),
		slots: make(chan struct{}, qd), posts: make(chan openPost, qd), quit: make(chan struct{}),
	}
	stop := context.AfterFunc(ctx, func() { o.fail(ctx.Err()) })
	defer stop()
	base := p.c.seq
	var held int64
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		n, err := o.send(base)
		held = n
		if err != nil {
			o.fail(err)
		}
	}()
	res, err := o.receive(base, h, resp)
	if err != nil {
		o.fail(err)
	}
	<-sent
	o.once.Do(func() {}) // a failure from ctx, under way, is complete
	p.c.seq = base + sched.Reads()
	if o.err != nil {
		return phaseResult{}, 0, o.err
	}
	return res, held, nil
}

// send posts each read at its due time, in batches of those already due,
// and returns how many were held back.
func (o *openLoop) send(base int64) (held int64, err error) {
	qd, bs := o.p.w.QueueDepth, o.p.w.BlockSize
	req := make([]byte, requestSize*qd)
	k := 0
	flush := func() error {
		if k == 0 {
			return nil
		}
		_, err := o.p.c.conn.Write(req[:k*requestSize])
		k = 0
		if err != nil {
			return fmt.Errorf("send request: %w", err)
		}
		return nil
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var opened time.Duration // when the window last opened after it was full
	for seq := base; ; seq++ {
		due, ok := o.sched.Next()
		if !ok {
			return held, flush()
		}
		if wait := due - time.Since(o.start); wait > 0 {
			if err := flush(); err != nil {
				return held, err
			}
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-o.quit:
				return held, nil
			}
		}
		select {
		case o.slots <- struct{}{}:
		default: // the window is full: this read waits for a reply
			if err := flush(); err != nil {
				return held, err
			}
			select {
			case o.slots <- struct{}{}:
			case <-o.quit:
				return held, nil
			}
			opened = time.Since(o.start)
		}
		post := openPost{seq: seq, due: due, posted: time.Since(o.start), heldBack: due < opened}
		if post.heldBack {
			held++
		}
		o.posts <- post // never blocks: the slot is taken
		off := uint64(o.p.order.Block(seq)) * uint64(bs)
		request{op: opRead, tag: uint32(seq), length: uint32(bs), offset: off}.encode(req[k*requestSize:])
		k++
	}
}

// receive reads every reply in order and records its latencies.
func (o *openLoop) receive(base int64, h, resp *results.Histogram) (phaseResult, error) {
	p := o.p
	bs := p.w.BlockSize
	r := bufio.NewReaderSize(p.c.conn, readBufSize(bs))
	lw := newLowat(p.c.conn)
	data := make([]byte, bs)
	var hdr [replySize]byte
	var intervals []int64
	var last time.Duration
	n := o.sched.Reads()
	for done := int64(0); done < n; done++ {
		var post openPost
		select {
		case post = <-o.posts:
		case <-o.quit:
			return phaseResult{}, o.err
		}
		if err := p.receive(r, lw, hdr[:], data, post.seq); err != nil {
			return phaseResult{}, err
		}
		last = time.Since(o.start)
		<-o.slots
		if h != nil {
			h.Record(uint64(last - post.posted))
			resp.Record(uint64(last - post.due))
			intervals = countInterval(intervals, last, p.w.Interval)
		}
	}
	return phaseResult{reads: n, seconds: last.Seconds(), start: o.start, intervals: intervals}, nil
}

// countInterval counts a completion at t into intervals of iv (none when
// iv is 0).
func countInterval(intervals []int64, t, iv time.Duration) []int64 {
	if iv <= 0 {
		return intervals
	}
	i := int(t / iv)
	for len(intervals) <= i {
		intervals = append(intervals, 0)
	}
	intervals[i]++
	return intervals
}
