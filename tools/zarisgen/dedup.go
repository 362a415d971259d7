package main

import (
	"fmt"
	"go/token"
	"strings"
)

// annDedup, on a single-key non-idempotent write, names its request-token field (rule B8).
const annDedup = "zaris.dedup"

// dedupModel is an operation's request token: the request field that carries it and the Go
// name of its struct.
type dedupModel struct {
	Field     string // the IDL name of the request field
	GoField   string // its Go name
	TokenType string // the Go name of the token struct
}

// buildDedup checks the zaris.dedup annotation of op, whose request struct is req and
// response struct resp, and returns its model, or the field at fault and why. The token
// field must be an optional struct of client: i64 and sequence: i64 (unset: the client sets
// it); the operation a non-idempotent single-key write, which alone needs one; and the
// response must carry version: i64, so that a replay can be answered with the first
// outcome, identified by the version the write made.
func buildDedup(p *program, op opModel, req, resp *structType, name string) (*dedupModel, string, string) {
	const ann = "annotation " + annDedup
	switch {
	case op.Kind != "write":
		return nil, ann, "only a write operation carries a request token: a read changes nothing a replay could repeat"
	case op.Idempotent:
		return nil, ann, `an idempotent operation needs no request token (a replay is already harmless): drop zaris.dedup or declare zaris.idempotent = "false"`
	case op.Batch != nil:
		return nil, ann, "a multi-key operation cannot carry a request token: its items are retried one by one; declare the token on a single-key operation"
	case !token.IsIdentifier(name):
		return nil, ann, fmt.Sprintf("%q is not a field name", name)
	}
	f := req.fieldByName(name)
	if f == nil {
		return nil, "field " + name, fmt.Sprintf("request-token field not found in request struct %s", req.Name)
	}
	if f.Required != "optional" {
		return nil, "field " + name, "the request-token field must be optional, so that its absence means the client sets it"
	}
	var tok *structType
	if f.TypeID == "struct" && f.Type != nil && !strings.Contains(f.Type.Class, ".") {
		tok = p.structByName(f.Type.Class)
	}
	if tok == nil || tokenShape(tok) != "" {
		found := f.TypeID
		if tok != nil {
			found = "struct " + tok.Name + ": " + tokenShape(tok)
		}
		return nil, "field " + name, fmt.Sprintf("the request-token field must be a struct of this IDL with fields client: i64 and sequence: i64 (a random client id and the call's number), found %s", found)
	}
	if v := resp.fieldByName("version"); v == nil || v.TypeID != "i64" {
		return nil, "response", fmt.Sprintf("response struct %s must carry version: i64 for a replay to be answered with the first outcome, the version the write made", resp.Name)
	}
	return &dedupModel{Field: name, GoField: goName(name), TokenType: goTypeName(tok.Name)}, "", ""
}

// tokenShape says what a request-token struct lacks, or "" when it has the two required
// i64 fields client and sequence.
func tokenShape(s *structType) string {
	for _, n := range []string{"client", "sequence"} {
		if f := s.fieldByName(n); f == nil || f.TypeID != "i64" || f.Required == "optional" {
			return "it needs " + n + ": required i64"
		}
	}
	return ""
}
