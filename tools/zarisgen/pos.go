package main

import (
	"fmt"
	"regexp"
	"strings"
)

// The IDL text is searched for where a declaration or an annotation is, so that every
// error names the IDL file and line. The JSON the Thrift compiler writes has no positions.

// code reports whether line is IDL code rather than a comment line.
func code(line string) bool {
	t := strings.TrimSpace(line)
	return t != "" && !strings.HasPrefix(t, "//") && !strings.HasPrefix(t, "*") &&
		!strings.HasPrefix(t, "/*") && !strings.HasPrefix(t, "#")
}

// find returns the index of the first code line at or after from that matches re, or -1.
func (p *program) find(re *regexp.Regexp, from int) int {
	if from < 0 {
		return -1
	}
	for i := from; i < len(p.lines); i++ {
		if code(p.lines[i]) && re.MatchString(p.lines[i]) {
			return i
		}
	}
	return -1
}

func word(w string) string { return `\b` + regexp.QuoteMeta(w) + `\b` }

// declLine is the line index of the declaration `keyword name` (enum, struct, service), or -1.
func (p *program) declLine(keyword, name string) int {
	return p.find(regexp.MustCompile(`^\s*`+keyword+`\s+`+word(name)), 0)
}

// memberLine is the line index of value name in enum, or of the enum when not found.
func (p *program) memberLine(enum, name string) int {
	start := p.declLine("enum", enum)
	if l := p.find(regexp.MustCompile(`^\s*`+word(name)+`\s*(=|,|\(|$)`), start); l >= 0 {
		return l
	}
	return start
}

// fieldLine is the line index of field name of struct s, or of the struct when not found.
func (p *program) fieldLine(s, name string) int {
	start := p.declLine("struct", s)
	if l := p.find(regexp.MustCompile(`\d+\s*:.*`+word(name)), start); l >= 0 {
		return l
	}
	return start
}

// functionLine is the line index of function fn of the service, or of the service.
func (p *program) functionLine(svc, fn string) int {
	start := p.declLine("service", svc)
	if l := p.find(regexp.MustCompile(word(fn)+`\s*\(`), start); l >= 0 {
		return l
	}
	return start
}

// annotationLine is the line index of annotation key at or after the line from (the
// declaration carrying it), or from when it is not found.
func (p *program) annotationLine(from int, key string) int {
	if l := p.find(regexp.MustCompile(`(^|[\s(,])`+regexp.QuoteMeta(key)+`\s*=`), from); l >= 0 {
		return l
	}
	return from
}

// fieldType is the type the IDL text declares for field name of struct s, or "" when
// zarisgen has no text or cannot find the field.
func (p *program) fieldType(s, name string) string {
	l := p.fieldLine(s, name)
	if l < 0 {
		return ""
	}
	re := regexp.MustCompile(`\d+\s*:\s*(?:required\s+|optional\s+)?([\w.]+)\s+` + regexp.QuoteMeta(name) + `\b`)
	if m := re.FindStringSubmatch(p.lines[l]); m != nil {
		return m[1]
	}
	return ""
}

// pos is source:LINE for the line index l, or source alone when l is unknown.
func pos(source string, l int) string {
	if l < 0 {
		return source
	}
	return fmt.Sprintf("%s:%d", source, l+1)
}
