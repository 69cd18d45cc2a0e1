package journaltest_test

// A sketch of a name → ID journal kept in a backend's own metadata: LVM
// volume-group tags. docs/backend-metadata.md walks through it. It is
// written against tagStore, so it runs here without LVM; a driver
// implements tagStore with `vgs --reportformat json -o vg_tags VG` and
// `vgchange --addtag … --deltag … VG` run through package command.
//
// Layout: one VG tag per record,
//
//	csikit:1:<kind>:<name>:<id>:<fingerprint>:<reserved unix ns>:<committed 0|1>
//
// with name, ID and fingerprint in unpadded URL-safe base64 (LVM tags
// allow only A-Z a-z 0-9 _ + . - / = ! : & # and 1024 bytes, so no request
// string reaches LVM as-is), and the committed response, which may be
// longer than one tag, in numbered chunk tags
//
//	csikit:1:<kind>:r:<id>:<chunk number>:<chunk>
//
// vgchange applies all of a call's --addtag and --deltag options in one
// metadata commit, so a record changes whole or not at all. LVM has no
// conditional write: reads and writes of one journal are serialised by
// its mutex, which is enough for a node-local driver (one process per VG).

import (
	"context"
	"encoding/base64"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/journal"
	"github.com/csikit/csikit/journal/journaltest"
)

// tagStore is what the journal needs of LVM: a volume group's tags, read
// whole, and changed in one metadata commit.
type tagStore interface {
	Tags(ctx context.Context) ([]string, error)
	ChangeTags(ctx context.Context, add, del []string) error
}

// tagJournal is a journal.Journal and journal.Lister on VG tags.
type tagJournal struct {
	store tagStore
	mu    sync.Mutex
}

const (
	tagPrefix = "csikit:1:"
	chunkLen  = 768 // base64 bytes of response per tag, well under 1024
	maxTag    = 1024
)

var b64 = base64.RawURLEncoding

type tagRecord struct {
	journal.Record
	tag    string   // the record's own tag
	chunks []string // its response chunk tags
}

func kindCode(k journal.Kind) string { return strconv.Itoa(int(k)) }

func (r tagRecord) encode() string {
	c := "0"
	if r.Committed {
		c = "1"
	}
	return tagPrefix + strings.Join([]string{kindCode(r.Kind), b64.EncodeToString([]byte(r.Name)),
		b64.EncodeToString([]byte(r.ID)), b64.EncodeToString(r.Fingerprint),
		strconv.FormatInt(r.Reserved.UnixNano(), 10), c}, ":")
}

func chunkTags(k journal.Kind, id string, resp []byte) []string {
	enc := b64.EncodeToString(resp)
	var out []string
	for i := 0; len(enc) > 0; i++ {
		n := min(chunkLen, len(enc))
		out = append(out, fmt.Sprintf("%s%s:r:%s:%d:%s", tagPrefix, kindCode(k), b64.EncodeToString([]byte(id)), i, enc[:n]))
		enc = enc[n:]
	}
	return out
}

// load parses the VG's tags into the records of kind k.
func (j *tagJournal) load(ctx context.Context, k journal.Kind) (map[string]*tagRecord, error) {
	tags, err := j.store.Tags(ctx)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "journal: reading volume group tags: %v", err)
	}
	recs := map[string]*tagRecord{} // by name
	type chunk struct {
		n   int
		tag string
	}
	chunks := map[string][]chunk{} // by encoded ID
	for _, t := range tags {
		f := strings.Split(strings.TrimPrefix(t, tagPrefix), ":")
		if !strings.HasPrefix(t, tagPrefix) || len(f) < 2 || f[0] != kindCode(k) {
			continue
		}
		if f[1] == "r" && len(f) == 5 {
			n, _ := strconv.Atoi(f[3])
			chunks[f[2]] = append(chunks[f[2]], chunk{n, t})
			continue
		}
		if len(f) != 6 {
			continue
		}
		name, err1 := b64.DecodeString(f[1])
		id, err2 := b64.DecodeString(f[2])
		fp, err3 := b64.DecodeString(f[3])
		ns, err4 := strconv.ParseInt(f[4], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil || err4 != nil {
			return nil, status.Errorf(codes.Internal, "journal: volume group tag %q is not a record", t)
		}
		recs[string(name)] = &tagRecord{Record: journal.Record{Kind: k, Name: string(name), ID: string(id),
			Fingerprint: fp, Reserved: time.Unix(0, ns), Committed: f[5] == "1"}, tag: t}
	}
	for _, r := range recs {
		cs := chunks[b64.EncodeToString([]byte(r.ID))]
		sort.Slice(cs, func(a, b int) bool { return cs[a].n < cs[b].n })
		var enc strings.Builder
		for _, c := range cs {
			r.chunks = append(r.chunks, c.tag)
			enc.WriteString(c.tag[strings.LastIndexByte(c.tag, ':')+1:])
		}
		if r.Committed {
			r.Response, _ = b64.DecodeString(enc.String())
		}
	}
	return recs, nil
}

func byID(recs map[string]*tagRecord, id string) *tagRecord {
	for _, r := range recs {
		if r.ID == id {
			return r
		}
	}
	return nil
}

func check(ctx context.Context, k journal.Kind, s ...string) error {
	if err := ctx.Err(); err != nil {
		return status.FromContextError(err).Err()
	}
	if k < journal.KindVolume || k > journal.KindGroupSnapshot {
		return status.Errorf(codes.InvalidArgument, "journal: unknown kind %d", uint8(k))
	}
	for _, v := range s {
		if v == "" || len(v) > journal.MaxKeyLen {
			return status.Errorf(codes.InvalidArgument, "journal: name or ID of %d bytes, want 1 to %d", len(v), journal.MaxKeyLen)
		}
	}
	return nil
}

func (j *tagJournal) write(ctx context.Context, add, del []string) error {
	for _, t := range add {
		if len(t) > maxTag {
			return status.Errorf(codes.InvalidArgument, "journal: a record of %d bytes does not fit an LVM tag (%d); use a shorter name or ID", len(t), maxTag)
		}
	}
	if err := j.store.ChangeTags(ctx, add, del); err != nil {
		return status.Errorf(codes.Unavailable, "journal: writing volume group tags: %v", err)
	}
	return nil
}

func (j *tagJournal) Reserve(ctx context.Context, r journal.Reservation) (journal.Record, error) {
	if err := check(ctx, r.Kind, r.Name, r.ID); err != nil {
		return journal.Record{}, err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	recs, err := j.load(ctx, r.Kind)
	if err != nil {
		return journal.Record{}, err
	}
	if old, ok := recs[r.Name]; ok {
		if string(old.Fingerprint) != string(r.Fingerprint) {
			return journal.Record{}, status.Errorf(codes.AlreadyExists, "%s %q exists with other parameters", r.Kind, r.Name)
		}
		return old.Record, nil
	}
	if other := byID(recs, r.ID); other != nil {
		return journal.Record{}, status.Errorf(codes.Internal, "journal: ID %q is bound to %s %q", r.ID, r.Kind, other.Name)
	}
	rec := tagRecord{Record: journal.Record{Kind: r.Kind, Name: r.Name, ID: r.ID, Fingerprint: r.Fingerprint, Reserved: time.Now()}}
	if err := j.write(ctx, []string{rec.encode()}, nil); err != nil {
		return journal.Record{}, err
	}
	rec.Fresh = true
	return rec.Record, nil
}

func (j *tagJournal) Commit(ctx context.Context, k journal.Kind, name, id string, response []byte) error {
	if err := check(ctx, k, name, id); err != nil {
		return err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	recs, err := j.load(ctx, k)
	if err != nil {
		return err
	}
	old, ok := recs[name]
	if !ok {
		return status.Errorf(codes.FailedPrecondition, "journal: commit of %s %q, which has no reservation", k, name)
	}
	if other := byID(recs, id); other != nil && other.Name != name {
		return status.Errorf(codes.Internal, "journal: ID %q is bound to %s %q", id, k, other.Name)
	}
	rec := tagRecord{Record: old.Record}
	rec.ID, rec.Committed = id, true
	del := append([]string{old.tag}, old.chunks...)
	add := append([]string{rec.encode()}, chunkTags(k, id, response)...)
	// A tag both deleted and added (a repeated commit) stays.
	both := func(t string) bool { return slices.Contains(add, t) && slices.Contains(del, t) }
	add, del = slices.DeleteFunc(slices.Clone(add), both), slices.DeleteFunc(del, both)
	return j.write(ctx, add, del)
}

func (j *tagJournal) LookupName(ctx context.Context, k journal.Kind, name string) (journal.Record, bool, error) {
	if err := check(ctx, k, name); err != nil {
		return journal.Record{}, false, err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	recs, err := j.load(ctx, k)
	if err != nil {
		return journal.Record{}, false, err
	}
	if r, ok := recs[name]; ok {
		return r.Record, true, nil
	}
	return journal.Record{}, false, nil
}

func (j *tagJournal) LookupID(ctx context.Context, k journal.Kind, id string) (journal.Record, bool, error) {
	if err := check(ctx, k, id); err != nil {
		return journal.Record{}, false, err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	recs, err := j.load(ctx, k)
	if err != nil {
		return journal.Record{}, false, err
	}
	if r := byID(recs, id); r != nil {
		return r.Record, true, nil
	}
	return journal.Record{}, false, nil
}

func (j *tagJournal) Release(ctx context.Context, k journal.Kind, id string) error {
	if err := check(ctx, k, id); err != nil {
		return err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	recs, err := j.load(ctx, k)
	if err != nil {
		return err
	}
	r := byID(recs, id)
	if r == nil {
		return nil
	}
	return j.write(ctx, nil, append([]string{r.tag}, r.chunks...))
}

func (j *tagJournal) Uncommitted(ctx context.Context, k journal.Kind, before time.Time) ([]journal.Record, error) {
	if err := check(ctx, k); err != nil {
		return nil, err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	recs, err := j.load(ctx, k)
	if err != nil {
		return nil, err
	}
	var out []journal.Record
	for _, r := range recs {
		if !r.Committed && r.Reserved.Before(before) {
			out = append(out, r.Record)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Reserved.Before(out[b].Reserved) })
	return out, nil
}

// fakeVG stands in for one LVM volume group: it refuses tags LVM would
// refuse, and applies a change whole.
type fakeVG struct {
	mu   sync.Mutex
	tags map[string]bool
}

var lvmTag = regexp.MustCompile(`^[A-Za-z0-9_+.\-/=!:&#]+$`)

func (v *fakeVG) Tags(context.Context) ([]string, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make([]string, 0, len(v.tags))
	for t := range v.tags {
		out = append(out, t)
	}
	return out, nil
}

func (v *fakeVG) ChangeTags(_ context.Context, add, del []string) error {
	for _, t := range append(slices.Clone(add), del...) {
		if !lvmTag.MatchString(t) || len(t) > maxTag || strings.HasPrefix(t, "-") {
			return fmt.Errorf("vgchange: invalid tag %q", t)
		}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, t := range del {
		delete(v.tags, t)
	}
	for _, t := range add {
		v.tags[t] = true
	}
	return nil
}

// TestTagJournal holds the sketch to the contract every journal keeps.
func TestTagJournal(t *testing.T) {
	vg := &fakeVG{tags: map[string]bool{}}
	j := &tagJournal{store: vg}
	journaltest.Run(t, journaltest.Options{
		Open:   func(*testing.T) journal.Journal { return j },
		Reopen: func(*testing.T, journal.Journal) journal.Journal { return &tagJournal{store: vg} },
	})
	if len(vg.tags) != 0 {
		t.Errorf("tags left after the cases released their records: %v", vg.tags)
	}
}
