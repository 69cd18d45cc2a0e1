//go:build linux

package driver

import (
	"encoding/json"
	"strconv"
	"strings"
)

// decodeRecord decodes a volume record (decodeAs calls it) without
// encoding/json's reflection and validation pass: a create+delete cycle
// decoded the record three times (DeleteVolume's lookup and the capacity
// ledger's charge and watch), some 6 % of the server's CPU. A record is
// an object json.Marshal wrote, so what this does not expect — an escape
// in a string, a null, a key that matches a field only ignoring case,
// anything malformed — hands the record to encoding/json, which decides.
// key is the record's key: an ID equal to it shares its string.
func (v *volume) decodeRecord(key string, raw []byte) error {
	if fastVolume(key, raw, v) {
		return nil
	}
	*v = volume{}
	return json.Unmarshal(raw, v)
}

// fastVolume decodes raw into v, reporting false (v untouched) if it
// cannot.
func fastVolume(recordKey string, raw []byte, v *volume) bool {
	var out volume
	var params bool // seen: encoding/json merges a repeated object
	p := jsonScan{b: raw}
	ok := p.object(func(key []byte) bool {
		if handled, ok := p.listingField(recordKey, key, listingFields{&out.ID, &out.Kind, &out.FSType, &out.AttachedTo}); handled {
			return ok
		}
		var ok bool
		switch string(key) {
		case "name", "source":
			var s []byte
			if s, ok = p.plainString(); ok {
				if string(key) == "name" {
					out.Name = string(s)
				} else {
					out.Source = string(s)
				}
			}
		case "capacity":
			out.Capacity, ok = p.int()
		case "projectId":
			out.ProjectID, ok = p.uint32()
		case "attachedRO":
			out.AttachedRO, ok = p.bool()
		case "ephemeral":
			out.Ephemeral, ok = p.bool()
		case "lazy":
			out.Lazy, ok = p.bool()
		case "created":
			// time.Time's own decoder, as encoding/json calls it.
			start := p.peekAt()
			if _, ok = p.plainString(); ok {
				ok = out.Created.UnmarshalJSON(raw[start:p.i]) == nil
			}
		case "params":
			if params {
				return false
			}
			params = true
			out.Params, ok = p.stringMap()
		case "published":
			out.Published, ok = p.stringList()
		default:
			// Records hold only volume's fields: anything else (a
			// field of another version, a key differing in case) is
			// encoding/json's to decide.
			return false
		}
		return ok
	})
	if ok {
		*v = out
	}
	return ok
}

// peekAt is the offset of the next value, after white space.
func (p *jsonScan) peekAt() int {
	p.ws()
	return p.i
}

// uint32 reads an unsigned integer that fits 32 bits.
func (p *jsonScan) uint32() (uint32, bool) {
	p.ws()
	j := p.i
	for j < len(p.b) && p.b[j] >= '0' && p.b[j] <= '9' {
		j++
	}
	n, err := strconv.ParseUint(string(p.b[p.i:j]), 10, 32)
	if err != nil || (j-p.i > 1 && p.b[p.i] == '0') {
		return 0, false
	}
	p.i = j
	return uint32(n), true
}

// bool reads true or false.
func (p *jsonScan) bool() (bool, bool) {
	p.ws()
	for _, lit := range []string{"true", "false"} {
		if strings.HasPrefix(string(p.b[p.i:]), lit) {
			p.i += len(lit)
			return lit == "true", true
		}
	}
	return false, false
}

// stringMap reads an object of plain strings.
func (p *jsonScan) stringMap() (map[string]string, bool) {
	if !p.byte('{') {
		return nil, false
	}
	m := map[string]string{}
	if p.peek() == '}' {
		p.i++
		return m, true
	}
	for {
		k, ok := p.plainString()
		if !ok || !p.byte(':') {
			return nil, false
		}
		val, ok := p.plainString()
		if !ok {
			return nil, false
		}
		m[string(k)] = string(val)
		if p.byte(',') {
			continue
		}
		return m, p.byte('}')
	}
}

// stringList reads an array of plain strings.
func (p *jsonScan) stringList() ([]string, bool) {
	if !p.byte('[') {
		return nil, false
	}
	l := []string{}
	if p.peek() == ']' {
		p.i++
		return l, true
	}
	for {
		s, ok := p.plainString()
		if !ok {
			return nil, false
		}
		l = append(l, string(s))
		if p.byte(',') {
			continue
		}
		return l, p.byte(']')
	}
}
