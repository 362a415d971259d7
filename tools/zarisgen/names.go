package main

import "strings"

// commonInitialisms are the words the Thrift Go generator (0.17) writes in capitals when one
// forms a whole word of an identifier ("id" → "ID", "node_id" → "NodeID").
var commonInitialisms = map[string]bool{
	"API": true, "ASCII": true, "CPU": true, "CSS": true, "DNS": true, "EOF": true, "GUID": true,
	"HTML": true, "HTTP": true, "HTTPS": true, "ID": true, "IP": true, "JSON": true, "LHS": true,
	"QPS": true, "RAM": true, "RHS": true, "RPC": true, "SLA": true, "SMTP": true, "SSH": true,
	"TCP": true, "TLS": true, "TTL": true, "UDP": true, "UI": true, "UID": true, "UUID": true,
	"URI": true, "URL": true, "UTF8": true, "VM": true, "XML": true, "XSRF": true, "XSS": true,
}

// goName returns the exported Go identifier the Thrift Go generator gives an IDL name: the
// first letter in capitals, each "_x" with x lower-case folded to "X", and common initialisms
// that form a whole word in capitals.
func goName(idl string) string {
	b := []byte(idl)
	b = fixInitialism(b, 0)
	for i := 1; i < len(b)-1; i++ {
		if b[i] != '_' {
			continue
		}
		if c := b[i+1]; c >= 'a' && c <= 'z' {
			b = append(b[:i], append([]byte{c - 'a' + 'A'}, b[i+2:]...)...)
		}
		b = fixInitialism(b, i)
	}
	if len(b) > 0 && b[0] >= 'a' && b[0] <= 'z' {
		b[0] -= 'a' - 'A'
	}
	return string(b)
}

// fixInitialism upper-cases the word starting at start (ending at the next '_' or the end)
// when it is a common initialism.
func fixInitialism(b []byte, start int) []byte {
	end := start + strings.IndexByte(string(b[start:]), '_')
	if end < start {
		end = len(b)
	}
	word := strings.ToUpper(string(b[start:end]))
	if commonInitialisms[word] {
		copy(b[start:end], word)
	}
	return b
}

// goTypeName returns the Go type name the Thrift Go generator gives an IDL struct: its
// goName, with "_" appended when it ends in "Args" or "Result" (those suffixes are reserved
// for the generated service argument and result types).
func goTypeName(idl string) string {
	n := goName(idl)
	if strings.HasSuffix(n, "Args") || strings.HasSuffix(n, "Result") {
		n += "_"
	}
	return n
}
