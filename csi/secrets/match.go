package secrets

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// MinLen is the shortest secret value, in bytes, that Redact looks for in
// text. Shorter values are still removed from messages by Strip, but not
// searched for: replacing every "a", "1" or "yes" in a log would make it
// unreadable and, by the pattern of what was replaced, would tell a reader
// the secret anyway. A secret of three bytes or fewer is not a secret a log
// can protect.
const MinLen = 4

// Depth is how many rounds of escaping Redact undoes: 2 finds a secret that
// was %q-formatted into a message which was then JSON-encoded (or the
// reverse), and each round may use a different escaper.
const Depth = 2

// unit is one character of a secret value: a UTF-8 encoded rune or, in a
// bytes secret, one byte that is not valid UTF-8.
type unit struct {
	raw    string   // the character unescaped
	plain  bool     // no supported escaper ever changes it: matched as is
	bad    bool     // an invalid UTF-8 byte
	spells []string // how one round of escaping may spell it
}

// needle is one secret value to look for.
type needle struct {
	raw   string
	units []*unit // nil when plain
	plain bool    // every byte plain: any spelling is raw itself
	hint  string  // the longest run of plain bytes: any spelling contains it
	// pre and post count the units before and after hint: a spelling
	// reaches at most unitReach bytes per unit around it.
	pre, post int
}

// plainByte marks the ASCII bytes no supported encoder escapes: letters,
// digits and the URL-unreserved "-._~". Everything else may be escaped by
// one of them.
var plainByte = func() (t [256]bool) {
	for c := 0; c < 128; c++ {
		t[c] = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '-' || c == '.' || c == '_' || c == '~'
	}
	return t
}()

// asciiUnits holds a unit for every ASCII byte, for the bytes of escape
// spellings that a later round may escape again (a backslash, a quote, %).
// It is a constant table, filled once.
var asciiUnits = func() (t [128]unit) {
	for c := range t {
		t[c] = newUnit(string(rune(c)), rune(c), false)
	}
	return t
}()

// singleEscapes are the one-letter backslash escapes of Go, JSON,
// JavaScript, Python and C.
var singleEscapes = map[rune]byte{
	'\a': 'a', '\b': 'b', '\f': 'f', '\n': 'n', '\r': 'r', '\t': 't', '\v': 'v',
	'\\': '\\', '"': '"', '\'': '\'', '/': '/',
}

func newUnit(raw string, r rune, bad bool) unit {
	u := unit{raw: raw, bad: bad, plain: len(raw) == 1 && plainByte[raw[0]]}
	if u.plain {
		return u
	}
	hex := func(prefix string, v uint32, width int) string {
		s := strconv.FormatUint(uint64(v), 16)
		return prefix + strings.Repeat("0", max(0, width-len(s))) + s
	}
	if e, ok := singleEscapes[r]; ok && !bad {
		u.spells = append(u.spells, `\`+string(e))
	}
	perByte := func(prefix string) string {
		var b strings.Builder
		for i := range len(raw) {
			b.WriteString(hex(prefix, uint32(raw[i]), 2))
		}
		return b.String()
	}
	u.spells = append(u.spells, perByte(`\x`), perByte("%"))
	switch {
	case bad:
		u.spells = append(u.spells, `\ufffd`)
	case r <= 0xffff:
		u.spells = append(u.spells, hex(`\u`, uint32(r), 4), hex(`\U`, uint32(r), 8))
	default:
		hi, lo := (r-0x10000)>>10+0xd800, (r-0x10000)&0x3ff+0xdc00
		u.spells = append(u.spells, hex(`\u`, uint32(hi), 4)+hex(`\u`, uint32(lo), 4), hex(`\U`, uint32(r), 8))
	}
	if r == ' ' {
		u.spells = append(u.spells, "+")
	}
	return u
}

func newNeedle(v string) needle {
	n := needle{raw: v, plain: true}
	for i := range len(v) {
		if !plainByte[v[i]] {
			n.plain = false
			break
		}
	}
	if n.plain {
		return n // matched with strings.Index; no units needed
	}
	n.units = make([]*unit, 0, utf8.RuneCountInString(v))
	run := 0
	for i := 0; i < len(v); {
		r, size := utf8.DecodeRuneInString(v[i:])
		var u *unit
		if r < utf8.RuneSelf {
			u = &asciiUnits[r] // shared: most secrets cost no spelling
		} else {
			nu := newUnit(v[i:i+size], r, r == utf8.RuneError && size == 1)
			u = &nu
		}
		n.units = append(n.units, u)
		if u.plain {
			run++
			if run > len(n.hint) {
				n.hint = v[i+1-run : i+1]
				n.pre = len(n.units) - run
			}
		} else {
			run = 0
		}
		i += size
	}
	if n.hint != "" {
		n.post = len(n.units) - n.pre - len(n.hint)
	}
	return n
}

// matcher finds where needles occur in one text. It runs one pass over
// the text per needle, keeping the partial matches (state: units matched,
// earliest start, and the position they reach) still ahead in pend; every
// unit takes at least one byte, so the pass only moves forward. bufs[l]
// are scratch sets for spellEnds at level l (calls nest with strictly
// decreasing levels, so one pair per level suffices).
type matcher struct {
	text  string
	work  int // steps taken; over limit, matching stops
	limit int // maxWork, or more for many secrets (see maxScan)
	bufs  [Depth][2][]int
	store [2 * Depth][8]int // initial backing for bufs
	pend  []state
	ends  []int
	best  []int  // per units-matched count: earliest start at this position
	seen  []int  // per units-matched count: position+1 it was last seen at
	order []int  // units-matched counts seen at this position
	memo  []memo // unitEnds results at this position, by unit
}

// memo records that unit u, starting at the current position, ends at
// m.ends[from:to].
type memo struct {
	u        *unit
	from, to int
}

// state is a partial match: k units matched from start, reaching at.
type state struct{ at, k, start int }

// init sets m up to search text.
func (m *matcher) init(text string) {
	m.text, m.limit = text, maxWork
	for l := range m.bufs {
		m.bufs[l][0], m.bufs[l][1] = m.store[2*l][:0], m.store[2*l+1][:0]
	}
}

// maxWork bounds the steps (unit matches plus set comparisons) spent on
// one text. Real texts and secrets need a few hundred; only adversarial
// ones (a long secret of backslashes against a long run of them) reach it,
// and then the whole text is withheld rather than half-checked.
const maxWork = 1 << 18

// addPos adds p to the set s.
func (m *matcher) addPos(s []int, p int) []int {
	m.work += len(s) + 1
	for _, q := range s {
		if q == p {
			return s
		}
	}
	return append(s, p)
}

// unitEnds adds to out every position where u, spelled with up to level
// rounds of escaping, ends if it starts at p.
func (m *matcher) unitEnds(p int, u *unit, level int, out []int) []int {
	if m.work > m.limit {
		return out
	}
	t := m.text[p:]
	if strings.HasPrefix(t, u.raw) {
		out = m.addPos(out, p+len(u.raw))
	}
	if u.bad && strings.HasPrefix(t, "\uFFFD") {
		out = m.addPos(out, p+len("\uFFFD"))
	}
	if level == 0 || u.plain || t == "" || !mayStartEscape[t[0]] {
		return out
	}
	for _, sp := range u.spells {
		out = m.spellEnds(p, sp, level-1, out)
	}
	return out
}

// mayStartEscape marks the bytes an escape spelling, escaped again any
// number of times, can start with.
var mayStartEscape = [256]bool{'\\': true, '%': true, '+': true}

// spellEnds adds to out every position where sp, its bytes spelled with up
// to level further rounds of escaping, ends if it starts at p. Letters
// right after a backslash are matched exactly; all other letters are hex
// digits and matched in either case.
func (m *matcher) spellEnds(p int, sp string, level int, out []int) []int {
	cur, next := append(m.bufs[level][0][:0], p), m.bufs[level][1][:0]
	for i := 0; i < len(sp) && len(cur) > 0; i++ {
		c := sp[i]
		next = next[:0]
		for _, q := range cur {
			switch {
			case !plainByte[c]:
				next = m.unitEnds(q, &asciiUnits[c], level, next)
			case q < len(m.text) && (m.text[q] == c || 'a' <= c && c <= 'f' && i > 0 && sp[i-1] != '\\' && m.text[q] == c-'a'+'A'):
				next = m.addPos(next, q+1)
			}
		}
		cur, next = next, cur
	}
	for _, q := range cur {
		out = m.addPos(out, q)
	}
	m.bufs[level][0], m.bufs[level][1] = cur, next
	return out
}

// span is a half-open byte range of the text that holds a secret.
type span struct{ from, to int }

// find appends to spans every occurrence of n in t. *mp is the matcher
// for t, made on first use: a secret of plain bytes needs none.
func find(t string, n *needle, spans []span, mp **matcher) []span {
	if n.plain {
		for off := 0; ; {
			i := strings.Index(t[off:], n.raw)
			if i < 0 {
				return spans
			}
			spans = append(spans, span{off + i, off + i + len(n.raw)})
			off += i + 1
		}
	}
	if n.hint != "" && !strings.Contains(t, n.hint) {
		return spans
	}
	if *mp == nil {
		*mp = new(matcher)
		(*mp).init(t)
	}
	return (*mp).scan(n, spans)
}

// endsAt returns where u ends if it starts at p, computing it once per
// unit and position: a secret repeating a character asks many times.
func (m *matcher) endsAt(p int, u *unit) []int {
	for _, c := range m.memo {
		if c.u == u {
			return m.ends[c.from:c.to:c.to]
		}
	}
	from := len(m.ends)
	// A set of its own: unitEnds dedupes against everything in out.
	m.ends = append(m.ends[:from], m.unitEnds(p, u, Depth, m.ends[from:from])...)
	m.memo = append(m.memo, memo{u, from, len(m.ends)})
	return m.ends[from:len(m.ends):len(m.ends)]
}

// scan appends to spans every occurrence of n, a needle with escapable
// characters, in m.text.
func (m *matcher) scan(n *needle, spans []span) []span {
	t := m.text
	if len(m.best) < len(n.units)+1 {
		m.best, m.seen = make([]int, len(n.units)+1), make([]int, len(n.units)+1)
	}
	clear(m.seen)
	first := n.units[0]
	pend := m.pend[:0]
	defer func() { m.pend = pend[:0] }()
	for p := 0; p <= len(t); p++ {
		m.order = m.order[:0]
		at := func(k, start int) {
			m.work++
			switch {
			case m.seen[k] != p+1:
				m.seen[k], m.best[k] = p+1, start
				m.order = append(m.order, k)
			case start < m.best[k]:
				m.best[k] = start
			}
		}
		if p < len(t) {
			if c := t[p]; c == first.raw[0] || !first.plain && mayStartEscape[c] || first.bad && c == 0xef {
				at(0, p)
			}
		}
		m.work += len(pend)
		for i := 0; i < len(pend); {
			if st := pend[i]; st.at == p {
				at(st.k, st.start)
				pend[i] = pend[len(pend)-1]
				pend = pend[:len(pend)-1]
				continue
			}
			i++
		}
		m.ends, m.memo = m.ends[:0], m.memo[:0]
		for _, k := range m.order {
			start := m.best[k]
			if k == len(n.units) {
				spans = append(spans, span{start, p})
				continue
			}
			for _, e := range m.endsAt(p, n.units[k]) {
				pend = append(pend, state{e, k + 1, start})
				m.work++
			}
		}
		if m.work > m.limit {
			return spans
		}
	}
	return spans
}
