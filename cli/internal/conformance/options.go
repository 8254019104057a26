package conformance

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/spf13/pflag"

	"github.com/gwdiag/gwdiag/steps"
)

// optionFlags are the flags of steps.OptionRegistry. They parse into a
// scratch Options; apply copies into the real one only the options whose
// flag was set, so that flags override the options file where given.
type optionFlags struct {
	scratch steps.Options
	values  []*optionValue
}

// optionValue is the pflag.Value of one registry option.
type optionValue struct {
	opt     steps.RunOption
	into    *steps.Options
	raw     string // the last value given, for options of no one field
	given   []string
	changed bool
}

func (v *optionValue) Set(s string) error {
	v.given = append(v.given, s)
	if v.opt.Apply != nil {
		v.raw = s
		v.changed = true
		return nil
	}
	if err := v.opt.Set(v.into, s, v.changed); err != nil {
		if v.opt.Flag == "env" {
			return fmt.Errorf("--env %q: want K=V", s)
		}
		return err
	}
	v.changed = true
	return nil
}

func (v *optionValue) String() string {
	if v.opt.Apply != nil || v.into == nil {
		return v.raw
	}
	if !v.changed {
		return v.opt.Default
	}
	return v.opt.Format(v.into)
}

func (v *optionValue) Type() string { return v.opt.TypeName() }

// add registers every registry option that has a flag.
func (fl *optionFlags) add(f *pflag.FlagSet) {
	for _, r := range steps.OptionRegistry {
		if r.Flag == "" {
			continue
		}
		v := &optionValue{opt: r, into: &fl.scratch}
		flag := f.VarPF(v, r.Flag, "", r.Help)
		flag.DefValue = r.Default
		if r.TypeName() == "bool" {
			flag.NoOptDefVal = "true"
		}
		fl.values = append(fl.values, v)
	}
}

// commandLine is the command as given, for a reader to run again: the
// command's path and every flag set, in flag order, shell-quoted.
func commandLine(path string, f *pflag.FlagSet) string {
	parts := []string{path}
	f.Visit(func(fl *pflag.Flag) {
		if v, ok := fl.Value.(*optionValue); ok {
			for _, s := range v.given {
				if v.opt.TypeName() == "bool" {
					parts = append(parts, "--"+fl.Name+"="+s)
					continue
				}
				parts = append(parts, "--"+fl.Name, shellQuote(s))
			}
			return
		}
		parts = append(parts, "--"+fl.Name, shellQuote(fl.Value.String()))
	})
	return strings.Join(parts, " ")
}

var shellSafe = regexp.MustCompile(`^[A-Za-z0-9@%+=:,./_-]+$`)

func shellQuote(s string) string {
	if shellSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// apply sets in o the options whose flag was set, in registry order.
func (fl *optionFlags) apply(o *steps.Options, f *pflag.FlagSet) error {
	for _, v := range fl.values {
		if !f.Changed(v.opt.Flag) {
			continue
		}
		if v.opt.Apply != nil {
			if err := v.opt.Apply(o, v.raw); err != nil {
				return err
			}
			continue
		}
		if s := v.opt.Format(&fl.scratch); v.opt.Positive && (strings.HasPrefix(s, "-") || s == "0" || s == "0s") {
			return fmt.Errorf("--%s %s: want a positive bound", v.opt.Flag, s)
		}
		v.opt.Copy(o, &fl.scratch)
	}
	return nil
}
