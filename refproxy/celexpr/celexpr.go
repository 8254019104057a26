// Package celexpr compiles the CEL expressions of refproxy (trace filters,
// follow outcome filters, rate-limit descriptors) one way: parse and check
// against an environment, require the result type, build the program.
package celexpr

import (
	"fmt"

	"cel.dev/cel-go/cel"
)

// Compile compiles expression in env. The result must be of a kind in
// want (cel.DynType is always accepted: a map lookup is dynamic); what
// describes the wanted result in errors ("bool").
func Compile(env *cel.Env, expression, what string, want []*cel.Type, opts ...cel.ProgramOption) (cel.Program, error) {
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
