// Command mutate scores a mutation run of the client: it reads the logs of gremlins
// (github.com/go-gremlins/gremlins, run by `make mutate`) and the list of mutants known to be
// equivalent, and prints the score and every surviving mutant by file:line:column.
//
//	go run ./mutate [-equivalent FILE] [-min PERCENT] [-module ROOT [-workers N]] DIR=LOG...
//
// Each DIR=LOG is one package tree's gremlins log, whose paths are relative to DIR (the
// tree's directory in the repository, such as middleware). The score is the killed mutants
// (a test failed, or the tests ran out of time) over every mutant not listed equivalent:
// a mutant in code no test runs (NOT COVERED) counts as a survivor. It exits 1 when the
// score is below -min.
//
// Gremlins cannot see a mutant in a case's condition, after a function literal in its
// statement, or in a declaration outside any function: Go's coverage has no block there, so
// gremlins reports it NOT COVERED and runs no test against it. With -module, the root of the module the logs are of, mutate
// runs those mutants itself, in copies of the module, and scores their outcomes with the
// rest; without it, they stay survivors.
//
// The equivalent list has one mutant a line, "file:line:column TYPE reason", with the file
// from the repository's root and the reason why no test can tell the mutant from the code;
// blank lines and lines starting with # are ignored. An entry that matches no surviving
// mutant is reported as stale.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"regexp"
	"sort"
	"strings"
)

// mutant is one mutant of a run.
type mutant struct {
	Status string // KILLED, LIVED, TIMED OUT, NOT COVERED, NOT VIABLE, SKIPPED
	Type   string // CONDITIONALS_NEGATION, ...
	Pos    string // file:line:column from the repository's root
}

// key is how the equivalent list names a mutant.
func (m mutant) key() string { return m.Pos + " " + m.Type }

// lineRE matches a mutant's line of a gremlins log: "   KILLED CONDITIONALS_NEGATION at retry.go:20:30".
var lineRE = regexp.MustCompile(`^\s*(KILLED|LIVED|TIMED OUT|NOT COVERED|NOT VIABLE|SKIPPED|RUNNABLE) ([A-Z_]+) at (\S+:\d+:\d+)\s*$`)

// parseLog returns the mutants of a gremlins log whose paths are relative to dir.
func parseLog(r io.Reader, dir string) ([]mutant, error) {
	var out []mutant
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		m := lineRE.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		out = append(out, mutant{Status: m[1], Type: m[2], Pos: path.Join(dir, m[3])})
	}
	return out, sc.Err()
}

// parseEquivalent returns the equivalent list's entries, by key, with their reasons.
func parseEquivalent(r io.Reader) (map[string]string, error) {
	out := map[string]string{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 3 {
			return nil, fmt.Errorf("line %d: want file:line:column TYPE reason, got %q", n, line)
		}
		out[f[0]+" "+f[1]] = strings.Join(f[2:], " ")
	}
	return out, sc.Err()
}

// score is a run's tally.
type score struct {
	Killed, TimedOut, Equivalent, Other int
	Survivors                           []mutant // lived or not covered, not equivalent
	Uncovered                           int      // of Survivors, not covered
	Stale                               []string // equivalent entries matching no survivor
}

// NonEquivalent is the mutants a test could tell from the code: killed or survivors.
func (s score) NonEquivalent() int { return s.Killed + s.TimedOut + len(s.Survivors) }

// Percent is the killed share of the non-equivalent mutants.
func (s score) Percent() float64 {
	if s.NonEquivalent() == 0 {
		return 100
	}
	return 100 * float64(s.Killed+s.TimedOut) / float64(s.NonEquivalent())
}

// tally counts ms; an equivalent entry under one of dirs that matches no survivor is stale.
func tally(ms []mutant, equivalent map[string]string, dirs ...string) score {
	var s score
	used := map[string]bool{}
	for _, m := range ms {
		switch m.Status {
		case "KILLED":
			s.Killed++
		case "TIMED OUT":
			s.TimedOut++
		case "LIVED", "NOT COVERED":
			if _, ok := equivalent[m.key()]; ok {
				s.Equivalent++
				used[m.key()] = true
				continue
			}
			s.Survivors = append(s.Survivors, m)
			if m.Status == "NOT COVERED" {
				s.Uncovered++
			}
		default:
			s.Other++
		}
	}
	for k := range equivalent {
		for _, d := range dirs {
			if !used[k] && strings.HasPrefix(k, d+"/") {
				s.Stale = append(s.Stale, k)
				break
			}
		}
	}
	sort.Strings(s.Stale)
	return s
}

func main() {
	eq := flag.String("equivalent", "", "the list of equivalent mutants")
	minimum := flag.Float64("min", 0, "exit 1 when the score, in percent, is below this")
	module := flag.String("module", "", "the root of the module the logs are of: run the mutants gremlins cannot see")
	workers := flag.Int("workers", 1, "with -module, how many mutants to run at once")
	coefficient := flag.Float64("timeout-coefficient", 3, "with -module, a mutant's tests time out after this many times their plain run")
	flag.Parse()
	blind := blindOptions{Root: *module, Workers: *workers, Coefficient: *coefficient}
	if err := run(os.Stdout, *eq, *minimum, blind, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		os.Exit(1)
	}
}

// blindOptions says whether and how to run the mutants gremlins cannot see.
type blindOptions struct {
	Root        string // the module's root; "" runs none
	Workers     int
	Coefficient float64
}

func run(w io.Writer, eqFile string, minimum float64, blind blindOptions, logs []string) error {
	equivalent := map[string]string{}
	if eqFile != "" {
		f, err := os.Open(eqFile)
		if err != nil {
			return err
		}
		equivalent, err = parseEquivalent(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", eqFile, err)
		}
	}
	if len(logs) == 0 {
		return fmt.Errorf("no DIR=LOG given")
	}
	var all []mutant
	var dirs []string
	for _, arg := range logs {
		dir, file, ok := strings.Cut(arg, "=")
		if !ok {
			return fmt.Errorf("%q: want DIR=LOG", arg)
		}
		f, err := os.Open(file)
		if err != nil {
			return err
		}
		ms, err := parseLog(f, dir)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		if blind.Root != "" {
			if ms, err = blindRun(context.Background(), w, blind.Root, ms, blind.Workers, blind.Coefficient); err != nil {
				return err
			}
		}
		s := tally(ms, equivalent)
		fmt.Fprintf(w, "%-12s %5.1f%%  killed %d (%d by a timeout) of %d non-equivalent; lived %d, not covered %d; equivalent %d\n",
			dir, s.Percent(), s.Killed+s.TimedOut, s.TimedOut, s.NonEquivalent(), len(s.Survivors)-s.Uncovered, s.Uncovered, s.Equivalent)
		all, dirs = append(all, ms...), append(dirs, dir)
	}
	s := tally(all, equivalent, dirs...)
	fmt.Fprintf(w, "%-12s %5.1f%%  killed %d of %d non-equivalent mutants, %d of them in code no test runs\n",
		"total", s.Percent(), s.Killed+s.TimedOut, s.NonEquivalent(), s.Uncovered)
	for _, m := range s.Survivors {
		fmt.Fprintf(w, "survived: %s %s (%s)\n", m.Pos, m.Type, strings.ToLower(m.Status))
	}
	for _, k := range s.Stale {
		fmt.Fprintf(w, "stale equivalent entry (no such survivor in this run): %s\n", k)
	}
	if s.Percent() < minimum {
		return fmt.Errorf("score %.1f%% is below %.1f%%", s.Percent(), minimum)
	}
	return nil
}
