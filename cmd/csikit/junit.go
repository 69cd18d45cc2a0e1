package main

import (
	"encoding/xml"
	"os"
	"strconv"
	"strings"
)

// JUnit XML, the subset CI systems read (Jenkins, GitLab, GitHub
// actions that publish test reports): one testsuite, a testcase per
// case, a failure or skipped element with the case's messages.
type junitSuites struct {
	XMLName xml.Name     `xml:"testsuites"`
	Suites  []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Time     string      `xml:"time,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Class   string        `xml:"classname,attr"`
	Name    string        `xml:"name,attr"`
	Time    string        `xml:"time,attr"`
	Failure *junitMessage `xml:"failure,omitempty"`
	Skipped *junitMessage `xml:"skipped,omitempty"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Body    string `xml:",chardata"`
}

// writeJUnit writes the report's cases to path as JUnit XML. Case
// messages come from the harness, which strips secrets from them.
func (r *report) writeJUnit(path string) error {
	pass, fail, skip := r.counts()
	s := junitSuite{Name: "csikit sanity", Tests: pass + fail + skip, Failures: fail, Skipped: skip, Time: seconds(r.elapsed.Seconds())}
	for _, k := range r.order {
		c := r.cases[k]
		if !c.reported() {
			continue
		}
		class, name := "sanity", c.name
		if i := strings.LastIndex(c.name, "/"); i >= 0 {
			class, name = "sanity/"+c.name[:i], c.name[i+1:]
		}
		jc := junitCase{Class: class, Name: name, Time: seconds(c.duration.Seconds())}
		out := strings.TrimSpace(indent(c.output.String()))
		switch c.outcome {
		case "FAIL":
			jc.Failure = &junitMessage{Message: firstMessage(c.output.String()), Body: out}
		case "SKIP":
			jc.Skipped = &junitMessage{Message: firstMessage(c.output.String())}
		}
		s.Cases = append(s.Cases, jc)
	}
	b, err := xml.MarshalIndent(junitSuites{Suites: []junitSuite{s}}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append([]byte(xml.Header), append(b, '\n')...), 0o644)
}

func seconds(s float64) string { return strings.TrimRight(strings.TrimRight(formatFloat(s), "0"), ".") }

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'f', 3, 64) }
