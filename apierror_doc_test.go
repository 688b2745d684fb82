package bandonce_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce"
)

// APIError is an alias of an internal type, so go doc shows its fields
// only through the alias's comment: every field must be listed there.
func TestAPIErrorDocListsEveryField(t *testing.T) {
	file, err := parser.ParseFile(token.NewFileSet(), "errors.go", nil, parser.ParseComments)
	require.NoError(t, err)
	var doc string
	ast.Inspect(file, func(n ast.Node) bool {
		if decl, ok := n.(*ast.GenDecl); ok && decl.Tok == token.TYPE {
			for _, spec := range decl.Specs {
				if spec.(*ast.TypeSpec).Name.Name == "APIError" {
					doc = decl.Doc.Text()
				}
			}
		}
		return true
	})
	require.NotEmpty(t, doc)
	typ := reflect.TypeFor[bandonce.APIError]()
	for i := range typ.NumField() {
		name := typ.Field(i).Name
		assert.True(t, strings.Contains(doc, name+" ") || strings.Contains(doc, name+","),
			"the APIError comment lists field %s", name)
	}
}
