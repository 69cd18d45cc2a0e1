//go:build linux

package driver

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
)

// volumeListing is what ListVolumes returns of a volume record.
type volumeListing struct {
	ID         string `json:"id"`
	Capacity   int64  `json:"capacity"`
	Kind       kind   `json:"kind"`
	FSType     string `json:"fsType,omitempty"`
	AttachedTo string `json:"attachedTo,omitempty"`
}

// UnmarshalJSON decodes the listing's fields of a volume record, skipping
// the others, without encoding/json's reflection and validation pass,
// which cost ~2 µs a record: a ListVolumes page of 500 spent about
// 1 ms decoding. A record is an object json.Marshal wrote (checksummed
// by the journal's log, and decoded in full at the driver's start), so
// what this does not expect — an escape in a string it keeps, invalid
// UTF-8, a key that matches one of its fields only ignoring case, a
// malformed value of a field it keeps — hands the record to
// encoding/json, which decides. The values of the other fields are
// passed over, their structure followed but not validated: a record
// malformed only there is listed where encoding/json would refuse it.
func (l *volumeListing) UnmarshalJSON(raw []byte) error { return l.decodeRecord("", raw) }

// decodeRecord is UnmarshalJSON for decodeAs, which calls it directly:
// through json.Unmarshal, a validation pass over the record comes first.
// key is the record's key: an ID equal to it shares its string rather
// than allocating a copy (a page of 500 made 500 of them).
func (l *volumeListing) decodeRecord(key string, raw []byte) error {
	if fastListing(key, raw, l) {
		return nil
	}
	type plain volumeListing // without this method
	var p plain
	err := json.Unmarshal(raw, &p)
	*l = volumeListing(p)
	return err
}

// fastListing decodes raw into l, reporting false if it cannot. An ID
// equal to recordKey is that string; the usual kinds and filesystem types are
// constants: so a record costs no allocation.
func fastListing(recordKey string, raw []byte, l *volumeListing) bool {
	var out volumeListing
	p := jsonScan{b: raw}
	ok := p.object(func(key []byte) bool {
		if string(key) == "capacity" {
			n, ok := p.int()
			out.Capacity = n
			return ok
		}
		if handled, ok := p.listingField(recordKey, key, listingFields{&out.ID, &out.Kind, &out.FSType, &out.AttachedTo}); handled {
			return ok
		}
		return p.skipUnknown(key, listingKeys)
	})
	if ok {
		*l = out
	}
	return ok
}

// listingKeys are the JSON keys of a volume record that a listing keeps.
var listingKeys = []string{"id", "capacity", "kind", "fsType", "attachedTo"}

// listingFields points at where the string fields a listing keeps go.
type listingFields struct {
	id         *string
	kind       *kind
	fsType     *string
	attachedTo *string
}

// listingField reads the value of key into out if key is one of the
// string fields a listing keeps (id, kind, fsType, attachedTo), reporting
// whether it was and whether the value read. An ID equal to recordKey is
// that string; the usual kinds and filesystem types are constants.
func (p *jsonScan) listingField(recordKey string, key []byte, out listingFields) (handled, ok bool) {
	switch string(key) {
	case "id", "kind", "fsType", "attachedTo":
	default:
		return false, false
	}
	v, ok := p.plainString()
	if !ok {
		return true, false
	}
	switch string(key) {
	case "id":
		if string(v) == recordKey {
			*out.id = recordKey
		} else {
			*out.id = string(v)
		}
	case "kind":
		*out.kind = internKind(v)
	case "fsType":
		*out.fsType = internFSType(v)
	default:
		*out.attachedTo = string(v)
	}
	return true, true
}

// skipUnknown passes over the value of a key no field takes, unless the
// key matches one of fields ignoring case (encoding/json would fill that
// field from it): then it reports false, for encoding/json to decide.
func (p *jsonScan) skipUnknown(key []byte, fields []string) bool {
	for _, f := range fields {
		if strings.EqualFold(string(key), f) {
			return false
		}
	}
	return p.skip()
}

// object reads the JSON object that is the whole of p's input, calling
// field with each key and p at the key's value; field reads the value and
// reports whether it could.
func (p *jsonScan) object(field func(key []byte) bool) bool {
	if !p.byte('{') {
		return false
	}
	if p.peek() == '}' {
		p.i++
	} else {
		for {
			key, ok := p.plainString()
			if !ok || !p.byte(':') || !field(key) {
				return false
			}
			if p.byte(',') {
				continue
			}
			if !p.byte('}') {
				return false
			}
			break
		}
	}
	p.ws()
	return p.i == len(p.b)
}

// internKind returns the kind spelled v, without allocating for the
// known ones.
func internKind(v []byte) kind {
	switch string(v) {
	case string(kindDir):
		return kindDir
	case string(kindBlock):
		return kindBlock
	case string(kindFS):
		return kindFS
	}
	return kind(v)
}

// internFSType returns the filesystem type spelled v, without allocating
// for the usual ones.
func internFSType(v []byte) string {
	switch string(v) {
	case "ext4":
		return "ext4"
	case "xfs":
		return "xfs"
	}
	return string(v)
}

// jsonScan reads JSON it expects, reporting false at anything else.
type jsonScan struct {
	b []byte
	i int
}

func (p *jsonScan) ws() {
	for p.i < len(p.b) && (p.b[p.i] == ' ' || p.b[p.i] == '\t' || p.b[p.i] == '\n' || p.b[p.i] == '\r') {
		p.i++
	}
}

func (p *jsonScan) peek() byte {
	p.ws()
	if p.i < len(p.b) {
		return p.b[p.i]
	}
	return 0
}

// byte consumes c, after white space.
func (p *jsonScan) byte(c byte) bool {
	if p.peek() != c {
		return false
	}
	p.i++
	return true
}

// plainString reads a string with no escapes, no control bytes and no
// invalid UTF-8.
func (p *jsonScan) plainString() ([]byte, bool) {
	if !p.byte('"') {
		return nil, false
	}
	n := bytes.IndexByte(p.b[p.i:], '"')
	if n < 0 {
		return nil, false
	}
	s := p.b[p.i : p.i+n]
	ascii := true
	for _, c := range s {
		if c == '\\' || c < 0x20 {
			return nil, false
		}
		ascii = ascii && c < utf8.RuneSelf
	}
	// encoding/json turns invalid UTF-8 into U+FFFD: let it.
	if !ascii && !utf8.Valid(s) {
		return nil, false
	}
	p.i += n + 1
	return s, true
}

// int reads an integer.
func (p *jsonScan) int() (int64, bool) {
	p.ws()
	j := p.i
	if j < len(p.b) && p.b[j] == '-' {
		j++
	}
	for j < len(p.b) && p.b[j] >= '0' && p.b[j] <= '9' {
		j++
	}
	n, err := strconv.ParseInt(string(p.b[p.i:j]), 10, 64)
	if d := p.b[p.i:j]; err != nil || len(d) > 1 && d[0] == '0' || len(d) > 2 && d[0] == '-' && d[1] == '0' {
		return 0, false
	}
	p.i = j
	return n, true
}

// skip passes over one value of any kind without checking it in full
// (strings may hold escapes).
func (p *jsonScan) skip() bool {
	depth := 0
	if c := p.peek(); c == 0 || c == '}' || c == ']' || c == ',' {
		return false // no value at all
	}
	for p.i < len(p.b) {
		switch c := p.b[p.i]; c {
		case '"':
			p.i++
			for p.i < len(p.b) && p.b[p.i] != '"' {
				if p.b[p.i] == '\\' {
					p.i++
				}
				p.i++
			}
			if p.i >= len(p.b) {
				return false
			}
			p.i++
		case '{', '[':
			depth++
			p.i++
		case '}', ']':
			if depth == 0 {
				return true // the end of the record: the caller checks it
			}
			depth--
			p.i++
		case ',':
			if depth == 0 {
				return true
			}
			p.i++
		default:
			p.i++
		}
		if depth == 0 {
			// A string or a closed container ends the value; a scalar
			// runs to the next delimiter.
			if c := p.b[p.i-1]; c == '"' || c == '}' || c == ']' {
				return true
			}
		}
	}
	return depth == 0
}
