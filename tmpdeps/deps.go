package deps
import (
 _ "cel.dev/cel-go/cel"
 _ "gopkg.in/yaml.v3"
 _ "github.com/cucumber/godog"
 _ "github.com/spf13/cobra"
 _ "github.com/olekukonko/tablewriter"
 _ "github.com/charmbracelet/bubbletea"
 _ "github.com/charmbracelet/bubbles/table"
 _ "github.com/charmbracelet/lipgloss"
 _ "github.com/charmbracelet/x/exp/teatest"
 _ "github.com/openai/openai-go/v3"
 _ "github.com/santhosh-tekuri/jsonschema/v6"
 _ "github.com/google/go-cmp/cmp"
 _ "sigs.k8s.io/yaml"
)
