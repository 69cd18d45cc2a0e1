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
			}
		} else {
			run = 0
		}
		i += size
	}
	return n
}

// matcher finds where needles occur in one text; a and b are scratch sets
// of positions for end, bufs[l] for spellEnds at level l (calls nest with
// strictly decreasing levels, so one pair per level suffices).
type matcher struct {
	text  string
	a, b  []int
	bufs  [Depth][2][]int
	store [2 + 2*Depth][8]int // initial backing for all of them
}

// init sets m up to search text.
func (m *matcher) init(text string) {
	m.text = text
	m.a, m.b = m.store[0][:0], m.store[1][:0]
	for l := range m.bufs {
		m.bufs[l][0], m.bufs[l][1] = m.store[2+2*l][:0], m.store[3+2*l][:0]
	}
}

// addPos adds p to the set s.
func addPos(s []int, p int) []int {
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
	t := m.text[p:]
	if strings.HasPrefix(t, u.raw) {
		out = addPos(out, p+len(u.raw))
	}
	if u.bad && strings.HasPrefix(t, "\uFFFD") {
		out = addPos(out, p+len("\uFFFD"))
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
				next = addPos(next, q+1)
			}
		}
		cur, next = next, cur
	}
	for _, q := range cur {
		out = addPos(out, q)
	}
	m.bufs[level][0], m.bufs[level][1] = cur, next
	return out
}

// end returns where the longest spelling of n that starts at p ends, or -1.
func (m *matcher) end(p int, n *needle) int {
	cur := append(m.a[:0], p)
	next := m.b[:0]
	for i := range n.units {
		next = next[:0]
		for _, q := range cur {
			next = m.unitEnds(q, n.units[i], Depth, next)
		}
		if len(next) == 0 {
			m.a, m.b = cur, next
			return -1
		}
		cur, next = next, cur
	}
	m.a, m.b = cur, next
	e := -1
	for _, q := range cur {
		e = max(e, q)
	}
	return e
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
	m := *mp
	first := n.units[0]
	for p := 0; p < len(t); p++ {
		c := t[p]
		if c != first.raw[0] && (first.plain || !mayStartEscape[c]) && !(first.bad && c == 0xef) {
			continue
		}
		if e := m.end(p, n); e > p {
			spans = append(spans, span{p, e})
		}
	}
	return spans
}
