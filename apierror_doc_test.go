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

// RetryPolicy is an alias of a type declared in package band, so go doc
// shows its fields only through the alias's comment: every field must be
// named there.
func TestAliasDocsListEveryField(t *testing.T) {
	for _, tc := range []struct {
		file, name string
		typ        reflect.Type
	}{
		{"retry.go", "RetryPolicy", reflect.TypeFor[bandonce.RetryPolicy]()},
	} {
		file, err := parser.ParseFile(token.NewFileSet(), tc.file, nil, parser.ParseComments)
		require.NoError(t, err)
		var doc string
		ast.Inspect(file, func(n ast.Node) bool {
			if decl, ok := n.(*ast.GenDecl); ok && decl.Tok == token.TYPE {
				for _, spec := range decl.Specs {
					if spec.(*ast.TypeSpec).Name.Name == tc.name {
						doc = decl.Doc.Text()
					}
				}
			}
			return true
		})
		require.NotEmpty(t, doc, tc.name)
		doc = strings.Join(strings.Fields(doc), " ")
		for i := range tc.typ.NumField() {
			name := tc.typ.Field(i).Name
			assert.True(t, strings.Contains(doc, name+" ") || strings.Contains(doc, name+","),
				"the %s comment lists field %s", tc.name, name)
		}
	}
}
