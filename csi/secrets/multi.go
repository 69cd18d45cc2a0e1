package secrets

import (
	"slices"
	"strings"
)

// multiFrom is the number of distinct secrets (of at least MinLen bytes)
// from which a Redactor finds them in one pass over the text (an
// Aho–Corasick automaton) instead of one pass per secret. Below it the
// passes per secret are cheaper than building the automaton.
const multiFrom = 33

// maxScan bounds, with many secrets, the bytes of text scanned by passes
// of one secret beyond the shared pass: a secret with characters an
// escaper may change (a quote, a backslash, a space…) is looked for by its
// own pass around each place its longest run of plain characters
// (letters, digits, "-._~") occurs in the text, as far as a spelling of
// its other characters can reach, and over all the text when it has no
// such run.
// Real texts need a few such passes; a text that would take more than 4
// MiB of them (thousands of such secrets whose runs all occur in it, or
// thousands made only of escapable characters) is replaced by Marker as a
// whole, as a text over maxWork is, never returned half-checked. The
// matching work these passes may take is maxWork plus scanWork steps per
// byte scanned, so the time per text is linear in its length plus a
// constant, whatever the number of secrets.
const maxScan = 4 << 20

// scanWork is the matching work (see maxWork) allowed per byte of text a
// pass of one secret scans, with many secrets: each pass over a text with
// escapes in it takes some at every escape, so one text-wide budget
// (maxWork) would withhold texts that hundreds of secrets' runs occur in.
const scanWork = 4

// automaton is an Aho–Corasick automaton over the keys of a Redactor with
// many secrets: the value of every plain secret (matched as is) and the
// hint of every other one (its longest plain run, which any spelling of it
// contains). States are indices; 0 is the root. A state's children are a
// chain (child, then sibling) sorted by label; the root's are also in a
// table.
type automaton struct {
	root    [256]int32
	child   []int32
	sibling []int32
	label   []byte
	fail    []int32
	// long is the length of the longest plain secret that is a suffix of
	// the state's string (0: none). At each text position only that one
	// matters: the shorter ones ending there lie inside it.
	long []int32
	// hint is the nearest state on the fail chain, the state itself
	// included, that ends a hint (0: none); group numbers, from 1, the
	// hint a state ends, an index into groups + 1.
	hint   []int32
	group  []int32
	groups [][]int32 // needle indices by hint
	free   []int32   // needles without a hint: always scanned
}

// next is the state reached from s by byte c, or -1 when s has no such
// child (the root has every child: a missing one leads back to it).
func (a *automaton) next(s int32, c byte) int32 {
	if s == 0 {
		return a.root[c]
	}
	for t := a.child[s]; t != 0; t = a.sibling[t] {
		switch l := a.label[t]; {
		case l == c:
			return t
		case l > c:
			return -1
		}
	}
	return -1
}

type acKey struct {
	s      string
	needle int32
	plain  bool
}

// newAutomaton builds the automaton for needles. Sorted keys let each
// new state be its parent's last child, so the trie is built in one pass
// over the keys' bytes, with no search.
func newAutomaton(needles []needle) *automaton {
	a := &automaton{}
	var plain, hints []acKey
	for i, n := range needles {
		switch {
		case n.plain:
			plain = append(plain, acKey{n.raw, int32(i), true})
		case n.hint != "":
			hints = append(hints, acKey{n.hint, int32(i), false})
		default:
			a.free = append(a.free, int32(i))
		}
	}
	// Needles come sorted from newRedactor when there are many, so the
	// plain values are; the hints are sorted here and merged in.
	byKey := func(x, y acKey) int { return strings.Compare(x.s, y.s) }
	if !slices.IsSortedFunc(plain, byKey) {
		slices.SortFunc(plain, byKey)
	}
	slices.SortFunc(hints, byKey)
	keys := make([]acKey, 0, len(plain)+len(hints))
	for len(plain) > 0 && len(hints) > 0 {
		if plain[0].s <= hints[0].s {
			keys, plain = append(keys, plain[0]), plain[1:]
		} else {
			keys, hints = append(keys, hints[0]), hints[1:]
		}
	}
	keys = append(append(keys, plain...), hints...)
	common := make([]int32, len(keys)) // each key's common prefix with the one before
	size := 1
	for i, k := range keys {
		if i > 0 {
			common[i] = int32(lcp(keys[i-1].s, k.s))
		}
		size += len(k.s) - int(common[i])
	}
	a.child = make([]int32, 1, size)
	a.sibling = make([]int32, 1, size)
	a.label = make([]byte, 1, size)
	a.long = make([]int32, 1, size)
	a.group = make([]int32, 1, size)
	last := make([]int32, 1, size) // each state's last child, while building
	path := []int32{0}             // the states of the previous key, by depth
	for i, k := range keys {
		d := int(common[i])
		path = path[:d+1]
		for ; d < len(k.s); d++ {
			p, n := path[d], int32(len(a.child))
			a.child, a.sibling, a.label = append(a.child, 0), append(a.sibling, 0), append(a.label, k.s[d])
			a.long, a.group, last = append(a.long, 0), append(a.group, 0), append(last, 0)
			if a.child[p] == 0 {
				a.child[p] = n
			} else {
				a.sibling[last[p]] = n
			}
			last[p] = n
			path = append(path, n)
		}
		end := path[len(k.s)]
		if k.plain {
			a.long[end] = int32(len(k.s))
			continue
		}
		if a.group[end] == 0 {
			a.groups = append(a.groups, nil)
			a.group[end] = int32(len(a.groups))
		}
		g := a.group[end] - 1
		a.groups[g] = append(a.groups[g], k.needle)
	}
	for t := a.child[0]; t != 0; t = a.sibling[t] {
		a.root[a.label[t]] = t
	}
	// Fail links breadth first: a state's fail is shallower than it.
	a.fail = make([]int32, len(a.child))
	a.hint = make([]int32, len(a.child))
	queue := make([]int32, 0, len(a.child))
	for t := a.child[0]; t != 0; t = a.sibling[t] {
		queue = append(queue, t)
	}
	for i := 0; i < len(queue); i++ {
		s := queue[i]
		if a.long[s] == 0 {
			a.long[s] = a.long[a.fail[s]]
		}
		if a.group[s] != 0 {
			a.hint[s] = s
		} else {
			a.hint[s] = a.hint[a.fail[s]]
		}
		for t := a.child[s]; t != 0; t = a.sibling[t] {
			c, f := a.label[t], a.fail[s]
			for {
				if g := a.next(f, c); g > 0 {
					a.fail[t] = g
					break
				}
				if f == 0 {
					break // fail[t] stays the root
				}
				f = a.fail[f]
			}
			queue = append(queue, t)
		}
	}
	return a
}

// lcp is the length of the longest common prefix of x and y.
func lcp(x, y string) int {
	n := min(len(x), len(y))
	for i := range n {
		if x[i] != y[i] {
			return i
		}
	}
	return n
}

// find appends to spans every occurrence in t of the secrets of needles
// (the Redactor's, which the automaton was built for). It reports false
// when t is too costly to check (maxScan, the work bound): withhold it
// all.
func (a *automaton) find(t string, needles []needle, spans []span) ([]span, bool) {
	var (
		cands []int32
		found map[int32]bool // hint states reported, with their fail chains
	)
	s := int32(0)
	for i := 0; i < len(t); i++ {
		c := t[i]
		for {
			if g := a.next(s, c); g >= 0 {
				s = g
				break
			}
			s = a.fail[s]
		}
		if l := int(a.long[s]); l > 0 {
			from, to := i+1-l, i+1
			for len(spans) > 0 && spans[len(spans)-1].to >= from {
				from = min(from, spans[len(spans)-1].from)
				spans = spans[:len(spans)-1]
			}
			spans = append(spans, span{from, to})
		}
		for h := a.hint[s]; h != 0 && !found[h]; h = a.hint[a.fail[h]] {
			if found == nil {
				found = make(map[int32]bool)
			}
			found[h] = true
			cands = append(cands, a.groups[a.group[h]-1]...)
		}
	}
	cands = append(cands, a.free...)
	if len(cands) == 0 {
		return spans, true
	}
	var (
		m       matcher
		windows []span
		scanned int
	)
	for _, i := range cands {
		n := &needles[i]
		windows = n.windows(t, windows[:0])
		for _, w := range windows {
			if scanned += w.to - w.from + 1; scanned > maxScan {
				return spans, false
			}
			m.init(t[w.from:w.to])
			m.limit = maxWork + scanWork*scanned
			k := len(spans)
			spans = m.scan(n, spans)
			for j := k; j < len(spans); j++ {
				spans[j].from += w.from
				spans[j].to += w.from
			}
			if m.work > m.limit {
				return spans, false
			}
		}
	}
	return spans, true
}

// unitReach is the most bytes one unit of a secret takes in any spelling
// (Depth rounds of escaping): a spelling of at most 16 bytes (\xHH for
// each of 4 UTF-8 bytes), each byte spelled again in at most 10
// (\U0000005c).
const unitReach = 16 * 10

// windows returns, merged, the stretches of t that a spelling of n can
// occupy: around each occurrence of its hint, as far as its units before
// and after the hint can reach; all of t when it has no hint.
func (n *needle) windows(t string, out []span) []span {
	if n.hint == "" {
		return append(out, span{0, len(t)})
	}
	for off := 0; ; {
		i := strings.Index(t[off:], n.hint)
		if i < 0 {
			return out
		}
		p := off + i
		w := span{max(0, p-n.pre*unitReach), min(len(t), p+len(n.hint)+n.post*unitReach)}
		if k := len(out) - 1; k >= 0 && out[k].to >= w.from {
			out[k].to = w.to
		} else {
			out = append(out, w)
		}
		off = p + 1
	}
}
