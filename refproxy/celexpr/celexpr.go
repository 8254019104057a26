// Package celexpr compiles the CEL expressions of refproxy's policies
// (rate-limit descriptors, policy conditions and authorization rules) one
// way: parse and check against an environment, require the result type,
// build the program. (The trace endpoint's filters are the protocol's:
// golden/trace/watch.)
//
// The request environment (requestEnv) is what policies see, as the
// reference implementation names it: request (method, path, host, headers,
// ...), source (address, port), jwt (the claims of the token a jwtAuth
// policy validated; empty without one, so has(jwt.sub) is false), apiKey
// (the metadata of the key an apiKey policy matched, key itself shown as
// "<redacted>") and basicAuth (username), with CEL's network functions
// (cidr("10.0.0.0/8").containsIP(source.address)) and random().
package celexpr

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/ext"
)

// compile compiles expression in env. The result must be of a kind in
// want (cel.DynType is always accepted: a map lookup is dynamic); what
// describes the wanted result in errors ("bool").
func compile(env *cel.Env, expression, what string, want []*cel.Type, opts ...cel.ProgramOption) (cel.Program, error) {
	ast, iss := env.Compile(expression)
	if iss.Err() != nil {
		return nil, iss.Err()
	}
	t := ast.OutputType()
	ok := t == cel.DynType
	for _, w := range want {
		ok = ok || t.Kind() == w.Kind()
	}
	if !ok {
		return nil, fmt.Errorf("expression yields %s, want %s", t, what)
	}
	return env.Program(ast, opts...)
}

// Result is what a request expression must yield.
type Result int

// Results of request expressions.
const (
	// Bool: conditions and authorization rules.
	Bool Result = iota
	// Scalar: descriptor values (a string, or a bool or number written as
	// a string).
	Scalar
	// Map: limit overrides.
	Map
)

// maxCost bounds the work of one request expression on one request (CEL's
// cost units, roughly one per operation): conditions and descriptors are a
// few lookups, and an expression that would cost more is cut off (it
// fails, and its policy treats it as not holding) rather than stall the
// data plane.
const maxCost = 10000

// requestEnv is the environment of request expressions.
var requestEnv = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("request", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("source", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("jwt", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("apiKey", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("basicAuth", cel.MapType(cel.StringType, cel.DynType)),
		ext.Network(),
		cel.Function("random", cel.Overload("random_double", nil, cel.DoubleType,
			cel.FunctionBinding(func(...ref.Val) ref.Val { return types.Double(rand.Float64()) }))),
	)
})

// NoClaims is jwt, apiKey and basicAuth of a request no auth policy
// authenticated: empty, so that has(jwt.sub) is false.
var NoClaims = map[string]any{}

// CompileRequest compiles a request expression yielding want.
func CompileRequest(expression string, want Result) (cel.Program, error) {
	env, err := requestEnv()
	if err != nil {
		return nil, err
	}
	switch want {
	case Bool:
		return compile(env, expression, "bool", []*cel.Type{cel.BoolType}, cel.CostLimit(maxCost))
	case Scalar:
		return compile(env, expression, "a string", []*cel.Type{cel.StringType, cel.BoolType, cel.IntType, cel.UintType, cel.DoubleType}, cel.CostLimit(maxCost))
	default:
		return compile(env, expression, "a map", []*cel.Type{cel.MapType(cel.StringType, cel.DynType)}, cel.CostLimit(maxCost))
	}
}

// Holds evaluates a bool program: an error, or a result that is not a
// bool, is false.
func Holds(p cel.Program, act any) bool {
	out, _, err := p.Eval(act)
	if err != nil {
		return false
	}
	b, ok := out.Value().(bool)
	return ok && b
}

// String is a scalar result as text (descriptor values, rate-limit keys):
// a string as it is, a bool or a number as its text; false for other
// values.
func String(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case bool:
		return strconv.FormatBool(v), true
	case int64:
		return strconv.FormatInt(v, 10), true
	case uint64:
		return strconv.FormatUint(v, 10), true
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64), true
	}
	return "", false
}
