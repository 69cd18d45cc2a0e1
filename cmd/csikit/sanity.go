package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/csikit/csikit/sanity"
)

// sanityChildEnv names the file holding the run's configuration in the
// environment of the process csikit sanity starts to run the harness: the
// harness runs as Go subtests, which need the testing package's runner,
// and that runner exits the process when done.
const sanityChildEnv = "CSIKIT_SANITY_CHILD"

// rootTest is the name of the one top-level test the child runs.
const rootTest = "sanity"

// childConfig is what the parent hands the child.
type childConfig struct {
	Endpoint string       `json:"endpoint"`
	Config   sanityConfig `json:"config"`
}

func sanityCommand() *command {
	return &command{
		name:    "sanity",
		summary: "run csikit's conformance harness against a driver by its endpoint",
		synopsis: []string{
			"csikit sanity [OPTIONS] ENDPOINT",
			"csikit sanity --config sanity.yaml --junit report.xml ENDPOINT",
		},
		description: `Runs package sanity, csikit's CSI conformance harness (every behaviour
upstream csi-sanity checks, plus concurrent retries, restarts, data
through published volumes, pagination, secrets in logs and left-over
mounts), against the driver serving at ENDPOINT, whatever its language.
Each case checks one rule of the CSI spec or of Kubernetes and names it
when it fails, with the request (secrets stripped) and the answer.

The driver must run on this machine, as root when its node service
mounts: the harness creates staging and target paths under --base-dir
and checks them. The configuration comes from --config (a YAML or JSON
file whose fields are the options' names in lowerCamelCase: accessType,
areas, fsType, volumeSize, expandSize, parameters, snapshotParameters,
mutableParameters, secrets, unsupportedAccessModes, callTimeout,
idempotentCount, concurrency, testAttachLimit, baseDir, skip, driverLog,
restartCommand, backendObjectsCommand, and splitBrain: nodeB, freeze,
checkDevice or checkCommand, trials, settle — the SplitBrain area, file
only) and then from the options, which win.

Areas a driver does not advertise the capabilities for skip themselves
with the reason. Without --restart-command the Restart area is skipped,
without --driver-log the search of the driver's log for secrets, and
without --backend-objects-command the check that no case leaves a
volume, snapshot or record behind in the driver's backend.

Each case's result is printed as it finishes (PASS, FAIL with its
message, SKIP with the reason; --quiet prints failures only), then the
tally. --junit writes a JUnit XML report for CI. --focus and --skip
select cases by path as "go test -run/-skip" do: slash-separated
regular expressions matched level by level against paths such as
mount/Node/NodePublishVolume/idempotent, so an alternation cannot span a
slash ('a/(b/c|d/e)' is split at its slashes first): to leave out a few
exact cases, give each with --skip-case PATH=REASON.`,
		exitStatus: `0      every case that ran passed.
1      a case failed (or the harness could not reach the driver).
2      bad options or configuration, or --focus/--skip left no case.`,
		examples: `csikit sanity /run/csi/csi.sock
csikit sanity --areas Identity,Node --driver-log /var/log/mydriver.log unix:///tmp/csi.sock
csikit sanity --config sanity.yaml --junit sanity.xml --secrets-file creds.yaml tcp://127.0.0.1:10000
csikit sanity --focus 'mount/Node' --skip 'mount/Node/NodeExpandVolume' /run/csi/csi.sock
csikit sanity --restart-command 'systemctl restart mydriver' /run/csi/csi.sock

A sanity.yaml:

    accessType: both
    volumeSize: 64Mi
    parameters: {pool: test}
    driverLog: /var/log/mydriver.log
    skip:
      block/Restart/: "restarts are covered by mount"`,
		flags: func(fs *flag.FlagSet) func(*env, []string) int {
			var sf sanityFlags
			sf.add(fs)
			var sec secretFlags
			sec.add(fs)
			config := fs.String("config", "", "read the configuration from `FILE` (YAML or JSON); options override it")
			junit := fs.String("junit", "", "write a JUnit XML report to `FILE`")
			focus := fs.String("focus", "", "run only the cases whose path matches `REGEXPS` (as go test -run)")
			skip := fs.String("skip", "", "leave out the cases whose path matches `REGEXPS` (as go test -skip)")
			quiet := fs.Bool("quiet", false, "print failed cases and the tally only")
			timeout := fs.Duration("timeout", time.Hour, "fail the whole run after `DURATION`")
			return func(e *env, args []string) int {
				if len(args) != 1 {
					e.errorf("sanity: want ENDPOINT (see csikit sanity --help)")
					return exitUsage
				}
				var c sanityConfig
				if *config != "" {
					var err error
					if c, err = loadSanityConfig(*config); err != nil {
						e.errorf("sanity: %v", err)
						return exitUsage
					}
				}
				sf.apply(&c)
				s, err := sec.load()
				if err != nil {
					e.errorf("sanity: %v", err)
					return exitUsage
				}
				if s != nil {
					c.Secrets = merge(c.Secrets, s)
				}
				if _, err := c.harnessConfig(); err != nil {
					e.errorf("sanity: %v", err)
					return exitUsage
				}
				return runSanity(e, childConfig{Endpoint: absEndpoint(args[0]), Config: c}, sanityRun{
					junit: *junit, focus: *focus, skip: *skip, quiet: *quiet, timeout: *timeout,
				})
			}
		},
	}
}

// sanityRun holds the options of one csikit sanity that are not harness
// configuration.
type sanityRun struct {
	junit, focus, skip string
	quiet              bool
	timeout            time.Duration
}

// runSanity starts this executable again as the harness's test runner,
// reads its test output, prints the results and writes the report.
func runSanity(e *env, cc childConfig, o sanityRun) int {
	dir, err := os.MkdirTemp("", "csikit-sanity")
	if err != nil {
		e.errorf("sanity: %v", err)
		return exitFail
	}
	defer os.RemoveAll(dir)
	// The configuration may hold secrets: a 0600 file in a 0700
	// directory, which the child removes once read.
	b, err := json.Marshal(cc)
	if err != nil {
		e.errorf("sanity: %v", err)
		return exitFail
	}
	path := filepath.Join(dir, "config.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		e.errorf("sanity: %v", err)
		return exitFail
	}
	self, err := os.Executable()
	if err != nil {
		e.errorf("sanity: finding this executable: %v", err)
		return exitFail
	}
	args := []string{"-test.v=test2json", "-test.count=1", "-test.timeout=" + o.timeout.String(), "-test.run=" + pattern(o.focus)}
	if o.skip != "" {
		args = append(args, "-test.skip="+pattern(o.skip))
	}
	cmd := exec.CommandContext(e.ctx, self, args...)
	cmd.Env = append(os.Environ(), sanityChildEnv+"="+path)
	cmd.SysProcAttr = childAttr() // the child dies with csikit (Linux)
	cmd.Stderr = e.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		e.errorf("sanity: %v", err)
		return exitFail
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		e.errorf("sanity: %v", err)
		return exitFail
	}
	rep := newReport()
	rep.read(out, e.stdout, o.quiet)
	waitErr := cmd.Wait()
	rep.elapsed = time.Since(start)
	// What the run itself reported (it could not reach the driver, or a
	// case panicked) belongs to no case: print it.
	if root := rep.cases[rootTest]; root != nil && root.outcome != "PASS" {
		for _, l := range strings.Split(root.output.String(), "\n") {
			if l = firstMessage(l); l != "" && (rep.tally == "" || l != "sanity: "+rep.tally) {
				fmt.Fprintf(e.stderr, "csikit: %s\n", l)
			}
		}
	}
	if o.junit != "" {
		if err := rep.writeJUnit(o.junit); err != nil {
			e.errorf("sanity: writing the JUnit report: %v", err)
			return exitFail
		}
	}
	pass, fail, skip := rep.counts()
	fmt.Fprintf(e.stdout, "\ncsikit sanity %s: %d passed, %d failed, %d skipped in %v\n", cc.Endpoint, pass, fail, skip, rep.elapsed.Round(time.Millisecond))
	if rep.tally != "" {
		fmt.Fprintf(e.stdout, "harness tally: %s\n", rep.tally)
	}
	switch {
	case waitErr != nil || fail > 0 || !rep.passed:
		if waitErr != nil && fail == 0 {
			e.errorf("sanity: the harness ended with %v", waitErr)
		}
		return exitFail
	case pass+skip == 0:
		e.errorf("sanity: no case ran: --focus %q and --skip %q leave none", o.focus, o.skip)
		return exitUsage
	}
	return exitOK
}

// pattern turns --focus/--skip into a -test.run/-test.skip pattern for
// the root test. An empty focus runs everything.
func pattern(p string) string {
	if p == "" {
		return "^" + rootTest + "$"
	}
	return "^" + rootTest + "$/" + p
}

// sanityChild runs the harness as the test runner's only test, with the
// configuration in the file at path, and returns the exit status.
func sanityChild(path string) int {
	b, err := os.ReadFile(path)
	os.Remove(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "csikit sanity: %v\n", err)
		return exitFail
	}
	var cc childConfig
	if err := json.Unmarshal(b, &cc); err != nil {
		fmt.Fprintf(os.Stderr, "csikit sanity: %v\n", err)
		return exitFail
	}
	cfg, err := cc.Config.harnessConfig()
	if err != nil {
		fmt.Fprintf(os.Stderr, "csikit sanity: %v\n", err)
		return exitUsage
	}
	testing.Main(func(pat, str string) (bool, error) { return regexp.MatchString(pat, str) },
		[]testing.InternalTest{{Name: rootTest, F: func(t *testing.T) {
			sanity.Run(t, sanity.Endpoint(cc.Endpoint), cfg)
		}}}, nil, nil)
	return exitFail // testing.Main exits
}

// report collects the results the child's test output shows.
type report struct {
	cases   map[string]*caseResult
	order   []string
	tally   string // the harness's own tally line
	passed  bool   // the run's final PASS
	elapsed time.Duration
}

// caseResult is one test's outcome.
type caseResult struct {
	name     string // path below the root test
	outcome  string // PASS, FAIL, SKIP
	duration time.Duration
	output   strings.Builder
	children int
}

func newReport() *report { return &report{cases: map[string]*caseResult{}} }

var resultLine = regexp.MustCompile(`^--- (PASS|FAIL|SKIP): (\S*) \(([0-9.]+)s\)$`)

// read parses the test2json-framed output of the child (framing lines
// start with 0x16), printing results to w as they come.
func (r *report) read(in io.Reader, w io.Writer, quiet bool) {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	cur := ""
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "\x16") {
			if c := r.cases[cur]; c != nil {
				c.output.WriteString(line + "\n")
			}
			if i := strings.Index(line, "sanity: "); i >= 0 && strings.Contains(line, " passed, ") {
				r.tally = line[i+len("sanity: "):]
			}
			continue
		}
		line = line[1:]
		switch {
		case strings.HasPrefix(line, "=== RUN"), strings.HasPrefix(line, "=== NAME"), strings.HasPrefix(line, "=== CONT"):
			f := strings.Fields(line)
			cur = ""
			if len(f) > 2 {
				cur = f[2]
			}
			if strings.HasPrefix(line, "=== RUN") && r.cases[cur] == nil {
				r.cases[cur] = &caseResult{name: strings.TrimPrefix(strings.TrimPrefix(cur, rootTest), "/")}
				r.order = append(r.order, cur)
				// A case's name may hold slashes of its own
				// ("GetPluginInfo/name_and_version"): its parent is the
				// longest prefix that ran.
				for i := strings.LastIndex(cur, "/"); i >= 0; i = strings.LastIndex(cur[:i], "/") {
					if p := r.cases[cur[:i]]; p != nil {
						p.children++
						break
					}
				}
			}
		case line == "PASS":
			r.passed = true
		default:
			m := resultLine.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			c := r.cases[m[2]]
			if c == nil {
				continue
			}
			c.outcome = m[1]
			secs, _ := time.ParseDuration(m[3] + "s")
			c.duration = secs
			if !c.reported() {
				continue
			}
			switch {
			case c.outcome == "FAIL":
				fmt.Fprintf(w, "FAIL  %s (%v)\n%s", c.name, c.duration, indent(c.output.String()))
			case quiet:
			case c.outcome == "SKIP":
				fmt.Fprintf(w, "SKIP  %s: %s\n", c.name, firstMessage(c.output.String()))
			default:
				fmt.Fprintf(w, "PASS  %s (%v)\n", c.name, c.duration)
			}
		}
	}
}

// reported says whether c counts as a case of its own: a leaf, or a
// group that failed or skipped with a message of its own.
func (c *caseResult) reported() bool {
	if c.name == "" {
		return false
	}
	return c.children == 0 || (c.outcome != "PASS" && strings.TrimSpace(c.output.String()) != "")
}

// counts tallies the reported cases.
func (r *report) counts() (pass, fail, skip int) {
	for _, k := range r.order {
		c := r.cases[k]
		if !c.reported() {
			continue
		}
		switch c.outcome {
		case "PASS":
			pass++
		case "FAIL":
			fail++
		case "SKIP":
			skip++
		}
	}
	return pass, fail, skip
}

// indent indents the lines of s under a result line.
func indent(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		if strings.TrimSpace(l) != "" {
			b.WriteString("      " + strings.TrimLeft(l, " ") + "\n")
		}
	}
	return b.String()
}

// firstMessage returns the first log message in a case's output, without
// the file:line prefix.
func firstMessage(s string) string {
	l := strings.TrimSpace(strings.SplitN(strings.TrimSpace(s), "\n", 2)[0])
	if i := strings.Index(l, ": "); i >= 0 && strings.Contains(l[:i], ".go:") {
		l = l[i+2:]
	}
	return l
}
