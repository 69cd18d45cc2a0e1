package sanity

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/csikit/csikit/command"
)

// DefaultSplitBrainTrials is how many times the SplitBrain area plays
// its sequence when SplitBrainConfig.Trials is zero.
const DefaultSplitBrainTrials = 20

// SplitBrainConfig turns on the SplitBrain area: node A (the Run
// target's node service) stages and publishes a volume and a writer
// process the harness starts stamps sequence numbers into a file on it,
// syncing each; node A's data path is frozen (SIGSTOP); the volume is
// unpublished from A and published to node B, which stages it, reads A's
// file and writes stamps of its own; A is resumed. A trial passes only if
// no write of A lands after ControllerUnpublishVolume(A) returned (B sees
// A's file unchanged, also after A's node plugin cleaned up), B's stamps
// are intact, A's NodeUnpublishVolume and NodeUnstageVolume succeed, and
// the filesystem checks clean once nothing stages it. A driver passes by
// fencing A at ControllerUnpublishVolume (csikit.Fencer).
type SplitBrainConfig struct {
	// NodeB is the endpoint of a second node plugin of the driver, with a
	// node ID of its own, on this host (unix:///abs/path, /abs/path or
	// tcp://host:port). Its staging and target paths are made under
	// Config.BaseDir like node A's. Required.
	NodeB string
	// Freeze stops node A's data path besides the writer, which the
	// harness stops itself: A's node plugin (when it is not the process
	// that serves the controller), a FUSE or NBD daemon. It returns the
	// function that resumes what it stopped. StopProcesses makes one from
	// process names and PIDs. Nil freezes the writer only.
	Freeze func(ctx context.Context) (resume func() error, err error)
	// Check checks the volume's filesystem without repairing it, after
	// the trial has unstaged it from both nodes (e.g. CheckFilesystem on
	// the volume's image or device); an error fails the trial. Nil checks
	// nothing, and the area logs that.
	Check func(ctx context.Context, volumeID string) error
	// Trials is how many times the sequence is played, each on a new
	// volume (default DefaultSplitBrainTrials).
	Trials int
	// Settle is how long node A runs after it is resumed before B looks
	// for its late writes (default 2 s).
	Settle time.Duration
}

// Record layout of the files the SplitBrain area writes: fixed-size
// lines "csikit-splitbrain <node> <seq> <unix nanoseconds>", padded with
// spaces, in slots the writer overwrites in place, so a late write needs
// no metadata change to land.
const (
	sbRecord = 128
	sbSlots  = 1024
	sbFileA  = "sanity-splitbrain-a"
	sbFileB  = "sanity-splitbrain-b"
)

// sbStamp is one parsed record.
type sbStamp struct {
	slot int
	node string
	seq  int64
	at   time.Time
}

// sbLine formats a record.
func sbLine(node string, seq int64, at time.Time) []byte {
	return fmt.Appendf(nil, "%-*s\n", sbRecord-1, fmt.Sprintf("csikit-splitbrain %s %d %d", node, seq, at.UnixNano()))
}

// sbParse parses a file of records; a slot that is not a record is
// returned as an error naming it.
func sbParse(b []byte) ([]sbStamp, error) {
	if len(b) != sbRecord*sbSlots {
		return nil, fmt.Errorf("file is %d bytes, want %d", len(b), sbRecord*sbSlots)
	}
	var out []sbStamp
	for i := range sbSlots {
		rec := b[i*sbRecord : (i+1)*sbRecord]
		f := strings.Fields(string(rec))
		if len(f) != 4 || f[0] != "csikit-splitbrain" || rec[sbRecord-1] != '\n' {
			return out, fmt.Errorf("slot %d holds %q, not a record", i, bytes.TrimRight(rec, " \n"))
		}
		seq, err1 := strconv.ParseInt(f[2], 10, 64)
		ns, err2 := strconv.ParseInt(f[3], 10, 64)
		if err1 != nil || err2 != nil {
			return out, fmt.Errorf("slot %d holds %q, not a record", i, bytes.TrimRight(rec, " \n"))
		}
		out = append(out, sbStamp{slot: i, node: f[1], seq: seq, at: time.Unix(0, ns)})
	}
	return out, nil
}

// sbFill is a file of sbSlots records of node with sequence 0.
func sbFill(node string) []byte {
	var b bytes.Buffer
	now := time.Now()
	for range sbSlots {
		b.Write(sbLine(node, 0, now))
	}
	return b.Bytes()
}

// sbWriterScript stamps records into $1 in place, one slot after the
// other, each synced (dd oflag=dsync), until it is killed. It needs sh,
// date (with %N) and dd (GNU or busybox with iflag=fullblock).
const sbWriterScript = `i=0
while :; do
	i=$((i+1))
	printf '%-127s\n' "csikit-splitbrain A $i $(date +%s%N)" |
		dd of="$1" bs=128 seek=$((i % 1024)) count=1 conv=notrunc oflag=dsync iflag=fullblock status=none 2>/dev/null
done`

// splitBrainCases plays the split-brain sequence Config.SplitBrain.Trials
// times.
func splitBrainCases(t *testing.T, s *suite) {
	sb := s.cfg.SplitBrain
	if s.access != MountAccess {
		t.Skip("the split-brain sequence writes files: it runs in the mount access type")
	}
	s.needCtrl(t, ccCreate, csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME)
	s.needNode(t)
	if sb.NodeB == "" {
		t.Fatal("Config.SplitBrain.NodeB is empty: the area needs the endpoint of a second node plugin")
	}
	if err := splitBrainSupported(); err != nil {
		t.Skip(err.Error())
	}
	trials := sb.Trials
	if trials <= 0 {
		trials = DefaultSplitBrainTrials
	}
	settle := sb.Settle
	if settle <= 0 {
		settle = 2 * time.Second
	}
	inB, err := Endpoint(sb.NodeB).launch(&s.cfg)
	if err != nil {
		t.Fatalf("connecting to Config.SplitBrain.NodeB: %v", err)
	}
	t.Cleanup(func() { _ = inB.close() })
	b := *s
	b.node = csi.NewNodeClient(inB.conn)
	ireq := &csi.NodeGetInfoRequest{}
	b.nodeInfo, err = call(s, b.node.NodeGetInfo, ireq)
	must(t, "NodeGetInfo (node B)", ireq, err, rule("NodeGetInfo", "every node plugin MUST implement it"))
	if b.nodeInfo.GetNodeId() == s.nodeInfo.GetNodeId() {
		t.Fatalf("node B answers NodeGetInfo with node ID %q, node A's: the area needs two nodes", b.nodeInfo.GetNodeId())
	}
	if sb.Check == nil {
		t.Log("Config.SplitBrain.Check is nil: the filesystem is not checked after the trials")
	}
	for i := range trials {
		s.run(t, fmt.Sprintf("trial_%02d", i+1), func(t *testing.T) { splitBrainTrial(t, s, &b, settle) })
	}
}

// fencingRule is what the area holds drivers to.
var fencingRule = kube("non-graceful node shutdown",
	"after ControllerUnpublishVolume(A) answers OK the volume is published to another node; a node that hung rather than died MUST NOT write to it again (the SP fences it before answering OK), or the filesystem is corrupted")

// splitBrainTrial plays the sequence once, on a new volume.
func splitBrainTrial(t *testing.T, a, b *suite, settle time.Duration) {
	sb := a.cfg.SplitBrain
	v := a.createVolume(t, a.createReq(a.name("split")))
	mA := a.mountVolume(t, v, false)
	fileA := filepath.Join(mA.target, sbFileA)
	if err := writeSynced(fileA, sbFill("A")); err != nil {
		t.Fatalf("node A: preparing %s: %v", fileA, err)
	}
	w, err := startWriter(fileA)
	if err != nil {
		t.Fatalf("starting the writer on node A: %v", err)
	}
	t.Cleanup(func() { _ = w.kill(5 * time.Second) })
	if err := w.waitProgress(fileA, 5, a.cfg.CallTimeout); err != nil {
		t.Fatalf("the writer on node A: %v", err)
	}

	// Freeze A's data path: the writer, then what the config names.
	if err := w.stop(); err != nil {
		t.Fatalf("freezing the writer: %v", err)
	}
	resumed := false
	var resumeRest func() error
	resume := func() {
		if resumed {
			return
		}
		resumed = true
		if resumeRest != nil {
			if err := resumeRest(); err != nil {
				t.Errorf("Config.SplitBrain.Freeze's resume: %v", err)
			}
		}
		if err := w.cont(); err != nil {
			t.Errorf("resuming the writer: %v", err)
		}
	}
	t.Cleanup(resume)
	if sb.Freeze != nil {
		ctx, cancel := context.WithTimeout(context.Background(), a.cfg.CallTimeout)
		resumeRest, err = sb.Freeze(ctx)
		cancel()
		if err != nil {
			t.Fatalf("Config.SplitBrain.Freeze: %v", err)
		}
	}

	// The CO gives up on A and moves the volume to B.
	ureq := &csi.ControllerUnpublishVolumeRequest{VolumeId: v.GetVolumeId(), NodeId: a.nodeInfo.GetNodeId(), Secrets: a.cfg.Secrets}
	_, err = retry(a, a.ctl.ControllerUnpublishVolume, ureq)
	must(t, "ControllerUnpublishVolume (node A frozen)", ureq, err,
		rule("ControllerUnpublishVolume", "MUST succeed for a published volume")+"; "+fencingRule)
	unpublished := time.Now()
	mB := b.mountVolume(t, v, false)
	fileB := filepath.Join(mB.target, sbFileB)
	first, err := readDirect(filepath.Join(mB.target, sbFileA))
	if err != nil {
		t.Fatalf("node B: reading node A's file: %v", err)
	}
	stamps, err := sbParse(first)
	if err != nil {
		t.Fatalf("node B: node A's file, as B finds it: %v", err)
	}
	lastA := int64(0)
	for _, st := range stamps {
		lastA = max(lastA, st.seq)
		if st.at.After(unpublished) {
			t.Errorf("node B finds node A's stamp %d, written at %s, after ControllerUnpublishVolume(A) returned at %s\n\trule: %s",
				st.seq, st.at.Format(time.RFC3339Nano), unpublished.Format(time.RFC3339Nano), fencingRule)
		}
	}
	ownB := sbFill("B")
	for i := range sbSlots {
		copy(ownB[i*sbRecord:], sbLine("B", int64(i+1), time.Now()))
	}
	if err := writeSynced(fileB, ownB); err != nil {
		t.Fatalf("node B: writing its stamps: %v", err)
	}

	// A wakes up.
	resume()
	time.Sleep(settle)
	checkB := func(when string) {
		t.Helper()
		got, err := readDirect(filepath.Join(mB.target, sbFileA))
		if err != nil {
			t.Errorf("node B, %s: reading node A's file: %v\n\trule: %s", when, err, fencingRule)
		} else if !bytes.Equal(got, first) {
			t.Errorf("node B, %s: node A's file changed after ControllerUnpublishVolume(A) returned: %s\n\trule: %s", when, lateWrites(got, first, lastA, unpublished), fencingRule)
		}
		gotB, err := readDirect(fileB)
		if err != nil {
			t.Errorf("node B, %s: reading its own stamps: %v\n\trule: %s", when, err, fencingRule)
		} else if !bytes.Equal(gotB, ownB) {
			t.Errorf("node B, %s: its own stamps changed (%d of %d bytes differ)\n\trule: %s", when, diffCount(gotB, ownB), len(ownB), fencingRule)
		}
	}
	checkB("after node A was resumed")

	// A's kubelet cleans up: the writer is gone (its pod was deleted),
	// unpublish and unstage must succeed without touching the volume.
	if err := w.kill(a.cfg.CallTimeout); err != nil {
		t.Errorf("node A: %v", err)
	}
	a.unpublish(t, mA)
	if mA.staging != "" {
		a.unstage(t, mA)
	}
	checkB("after node A unpublished and unstaged")

	b.unpublish(t, mB)
	if mB.staging != "" {
		b.unstage(t, mB)
	}
	if sb.Check != nil {
		ctx, cancel := context.WithTimeout(context.Background(), a.cfg.CallTimeout)
		defer cancel()
		if err := sb.Check(ctx, v.GetVolumeId()); err != nil {
			t.Errorf("the filesystem of volume %s after the trial: %v\n\trule: %s", v.GetVolumeId(), err, fencingRule)
		}
	}
}

// lateWrites describes how got differs from first: the records node A
// wrote late, newest first.
func lateWrites(got, first []byte, lastA int64, unpublished time.Time) string {
	stamps, err := sbParse(got)
	if err != nil {
		return fmt.Sprintf("%d of %d bytes differ; %v", diffCount(got, first), len(first), err)
	}
	var late []string
	changed := 0
	for _, st := range stamps {
		if bytes.Equal(got[st.slot*sbRecord:(st.slot+1)*sbRecord], first[st.slot*sbRecord:(st.slot+1)*sbRecord]) {
			continue
		}
		changed++
		if len(late) < 3 {
			if d := st.at.Sub(unpublished).Round(time.Millisecond); d >= 0 {
				late = append(late, fmt.Sprintf("stamp %d written %s after the unpublish", st.seq, d))
			} else {
				// Stamped, then frozen before the write: it landed late.
				late = append(late, fmt.Sprintf("stamp %d (stamped %s before the unpublish, written after)", st.seq, -d))
			}
		}
	}
	return fmt.Sprintf("%d records rewritten by node A after it was frozen (its last stamp before: %d), e.g. %s",
		changed, lastA, strings.Join(late, "; "))
}

// CheckFilesystem checks the filesystem on device (a block device or an
// image file) without repairing anything: e2fsck -f -n for ext2/3/4,
// xfs_repair -n for xfs (the type read by blkid). It returns nil when the
// filesystem is clean, else an error with the tool's report. For
// SplitBrainConfig.Check.
func CheckFilesystem(ctx context.Context, device string) error {
	res, err := command.Run(ctx, "blkid", []string{"-p", "-o", "value", "-s", "TYPE", device}, command.Options{})
	if err != nil {
		return fmt.Errorf("blkid %s: %w", device, err)
	}
	var name string
	var args []string
	switch fs := strings.TrimSpace(string(res.Stdout)); fs {
	case "ext2", "ext3", "ext4":
		name, args = "e2fsck", []string{"-f", "-n", device}
	case "xfs":
		name, args = "xfs_repair", []string{"-n", "-f", device}
	default:
		return fmt.Errorf("%s holds filesystem %q: CheckFilesystem checks ext2/3/4 and xfs", device, fs)
	}
	if _, err := command.Run(ctx, name, args, command.Options{}); err != nil {
		var ce *command.Error
		if errors.As(err, &ce) {
			return fmt.Errorf("%s %s found errors (exit status %d): %s", name, device, ce.ExitCode,
				findings(string(ce.Stdout)+"\n"+string(ce.Stderr)))
		}
		return fmt.Errorf("%s %s: %w", name, device, err)
	}
	return nil
}

// findings keeps what a checker found from its report: its progress
// lines ("Pass 1: ...", "Phase 2 - ...", "- scan ...") and version
// banner go.
func findings(report string) string {
	var out []string
	for _, l := range strings.Split(report, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case l == "", strings.HasPrefix(l, "Pass "), strings.HasPrefix(l, "Phase "),
			strings.HasPrefix(l, "- "), strings.HasPrefix(l, "e2fsck 1."):
			continue
		}
		out = append(out, l)
	}
	if len(out) == 0 {
		return strings.TrimSpace(report)
	}
	return strings.Join(out, "; ")
}
