package secrets

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestMultiMatchesPerSecret: with many secrets, the one-pass automaton
// redacts exactly what one pass per secret does, for random secrets
// (plain ones, ones with escapable characters, ones made only of them,
// secrets inside others) in texts built from their spellings.
func TestMultiMatchesPerSecret(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	alphabet := []string{"a", "b", "c", "1", "-", "_", " ", `"`, `\`, "%", "é", "\n", "+"}
	word := func(lo, hi int) string {
		var b strings.Builder
		for range lo + r.IntN(hi-lo+1) {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		return b.String()
	}
	spell := []func(string) string{
		func(s string) string { return s },
		func(s string) string { return strconv.Quote(s) },
		func(s string) string { return strconv.Quote(strconv.Quote(s)) },
		func(s string) string { return strings.ReplaceAll(strconv.QuoteToASCII(s), `\`, `\\`) },
	}
	for round := range 100 {
		var vals []string
		for range 40 + r.IntN(40) {
			v := word(2, 9)
			vals = append(vals, v)
			if r.IntN(4) == 0 && len(v) > 2 { // a secret inside another
				vals = append(vals, v[r.IntN(len(v)/2):])
			}
		}
		var text strings.Builder
		for range 20 {
			text.WriteString(word(0, 6))
			if round%2 == 1 { // long stretches: windows smaller than the text
				text.WriteString(strings.Repeat("x", r.IntN(1200)))
			}
			if v := vals[r.IntN(len(vals))]; r.IntN(3) > 0 {
				text.WriteString(spell[r.IntN(len(spell))](v))
			}
		}
		s := text.String()
		one, multi := newRedactor(vals, 1<<30), newRedactor(vals, 1)
		if one == nil {
			continue
		}
		if multi.ac == nil || one.ac != nil {
			t.Fatal("newRedactor did not choose the path asked for")
		}
		if got, want := multi.Redact(s), one.Redact(s); got != want {
			t.Fatalf("round %d: secrets %q\ntext %q\nautomaton  %q\nper secret %q", round, vals, s, got, want)
		}
	}
}

// TestMultiSubstringSecrets: a secret that is part of another is redacted
// whole wherever either occurs, with the longer one fully covered.
func TestMultiSubstringSecrets(t *testing.T) {
	// bcd"q is looked for where its plain run "bcd" occurs: also inside
	// the plain secret xabcd, which the automaton reaches first.
	vals := []string{"abcdefgh", "cdef", "efgh", "defghijk", "zzzz", "xabcd", `bcd"q`}
	for i := range 40 {
		vals = append(vals, "pad-"+strconv.Itoa(i)+"-value")
	}
	r := newRedactor(vals, multiFrom)
	if r.ac == nil {
		t.Fatal("no automaton for 45 secrets")
	}
	for text, want := range map[string]string{
		"x abcdefgh y":        "x " + Marker + " y",
		"x abcdefghijk y":     "x " + Marker + " y",
		"x cdef y efgh z":     "x " + Marker + " y " + Marker + " z",
		"x abcdefg y":         "x ab" + Marker + "g y",
		"zzzzzzz":             Marker,
		"pad-1-value pad-1-v": Marker + " pad-1-v",
		"pad-12-value":        Marker,
		`1 xabcd"q 2`:         "1 " + Marker + " 2",
		`1 xabcd\"q 2`:        "1 " + Marker + " 2",
	} {
		if got := r.Redact(text); got != want {
			t.Errorf("Redact(%q) = %q, want %q", text, got, want)
		}
	}
}

// TestMultiScanBound: secrets that need a pass of their own are looked
// for only around their plain runs, so thousands of them whose runs all
// occur in a text are checked, not withheld; thousands with no plain run
// at all, each a pass over the whole text, withhold it past maxScan.
func TestMultiScanBound(t *testing.T) {
	var vals []string
	var text strings.Builder
	for i := range 5000 {
		vals = append(vals, "h"+strconv.Itoa(i)+`"q`)
		text.WriteString("h" + strconv.Itoa(i) + " ")
	}
	r := newRedactor(vals, multiFrom)
	if got := r.Redact(text.String()); got != text.String() {
		t.Errorf("Redact of a text without secrets = %.80q…, want it unchanged", got)
	}
	if got := r.Redact(`short h12\"q text`); got != "short "+Marker+" text" {
		t.Errorf("Redact = %q", got)
	}

	const escapable = ` "\%+/!#`
	vals = vals[:0]
	for i := range 2000 {
		var b strings.Builder
		for d := i; b.Len() < 5; d /= 8 {
			b.WriteByte(escapable[d%8])
		}
		vals = append(vals, b.String())
	}
	r = newRedactor(vals, multiFrom)
	if r.ac == nil || len(r.ac.free) != 2000 {
		t.Fatal("want 2000 secrets without a plain run")
	}
	long := strings.Repeat("a plain text of many words ", 200) // 5.4 KB, 2000 passes: over maxScan
	if got := r.Redact(long); got != Marker {
		t.Errorf("Redact over maxScan = %.80q…, want Marker", got)
	}
	if got := r.Redact("a short one"); got != "a short one" {
		t.Errorf("Redact = %q, want it unchanged", got)
	}
}

// TestUnitReach: no unit of a secret is spelled in more than unitReach
// bytes, which bounds the windows a needle is looked for in.
func TestUnitReach(t *testing.T) {
	ascii := 0
	for c := range asciiUnits {
		for _, sp := range asciiUnits[c].spells {
			ascii = max(ascii, len(sp))
		}
	}
	one := 0
	for _, r := range []rune{0x7f, 0xff, 0x7ff, 0xffff, 0x10ffff, utf8.RuneError} {
		u := newUnit(string(r), r, false)
		for _, sp := range u.spells {
			one = max(one, len(sp))
		}
	}
	bad := newUnit("\xff", utf8.RuneError, true)
	for _, sp := range bad.spells {
		one = max(one, len(sp))
	}
	if one*ascii > unitReach || 4*ascii > unitReach {
		t.Errorf("a unit may take %d bytes, unitReach is %d", one*ascii, unitReach)
	}
}
