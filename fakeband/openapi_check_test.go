package fakeband_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/fakeband"
)

// The machinery of the conformance test: load Band's OpenAPI document,
// send an exchange to the fake, find the documented operation its URL
// and method match, and validate the answer against it.

// specEnv names the variable holding the document's path. The document
// is Band's, not ours, so it is not in the repository; .ci/run sets it.
const specEnv = "BAND_OPENAPI_SPEC"

// loadBandDocument loads the document, or skips the test saying why.
func loadBandDocument(t *testing.T) (*openapi3.T, routers.Router) {
	t.Helper()
	path := os.Getenv(specEnv)
	if path == "" {
		t.Skip(specEnv + " is unset, so the fake was NOT checked against Band's OpenAPI document; " +
			"set it to the path of band-openapi.json (.ci/run sets it to ../shared/reference/band-openapi.json)")
	}
	data, err := os.ReadFile(path)
	require.NoError(t, err, "%s=%s", specEnv, path)
	doc, err := openapi3.NewLoader().LoadFromData(repairComponentNames(t, data))
	require.NoError(t, err)
	require.NoError(t, doc.Validate(context.Background()), "the repaired document is valid OpenAPI")
	// kin-openapi asserts date-time by itself but not uuid; ids are
	// compared as uuids by Band's clients, so hold the fake to the format.
	doc.SetStringFormatValidator("uuid", openapi3.NewRegexpFormatValidator(openapi3.FormatOfStringForUUIDOfRFC9562))
	// The document's only server is production; route the fake's
	// in-memory host instead, with the same paths.
	doc.Servers = openapi3.Servers{{URL: "http://" + fakeband.Host}}
	router, err := legacy.NewRouter(doc)
	require.NoError(t, err)
	return doc, router
}

// componentName is what OpenAPI allows as a component's name.
var componentName = regexp.MustCompile(`^[a-zA-Z0-9._-]+$`)

// repairComponentNames fixes a defect of Band's document, not of the fake:
// 63 schemas are named like "Agent API/Identity_getAgentMe_Response_200",
// and referred to with that unescaped "/" inside a JSON pointer, which
// then points nowhere. It renames each to a legal name (every other
// character becomes "_") and rewrites the references; nothing else
// changes, so every schema keeps its meaning.
func repairComponentNames(t *testing.T, data []byte) []byte {
	t.Helper()
	var doc map[string]any
	require.NoError(t, json.Unmarshal(data, &doc))
	components, _ := doc["components"].(map[string]any)
	schemas, _ := components["schemas"].(map[string]any)
	require.NotEmpty(t, schemas, "the document has components.schemas")
	const prefix = "#/components/schemas/"
	renamed := map[string]string{}
	illegal := regexp.MustCompile(`[^a-zA-Z0-9._-]`)
	for name, schema := range schemas {
		if componentName.MatchString(name) {
			continue
		}
		legal := illegal.ReplaceAllString(name, "_")
		require.NotContains(t, schemas, legal, "renaming %q would clash", name)
		delete(schemas, name)
		schemas[legal] = schema
		renamed[prefix+name] = prefix + legal
	}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if ref, ok := x["$ref"].(string); ok && renamed[ref] != "" {
				x["$ref"] = renamed[ref]
			}
			for _, child := range x {
				walk(child)
			}
		case []any:
			for _, child := range x {
				walk(child)
			}
		}
	}
	walk(doc)
	out, err := json.Marshal(doc)
	require.NoError(t, err)
	return out
}

// exception is a deliberate difference between the fake and the document:
// a status the fake answers that the operation does not list. The body is
// still checked: empty, or against the named component schema.
type exception struct {
	op     string   // operationId, or "" for every agent operation
	notFor []string // with op "": the operations that document this status
	status int
	body   string // a component schema name, or "" for an empty body
	why    string
}

// exchange is one request to the fake and what it must be answered with.
type exchange struct {
	name   string
	method string
	path   string // under /api/v1
	key    string
	body   any // nil: none; a string is sent as is
	status int
	// offDocument says why the request itself departs from the document
	// (a missing key, a malformed body), so it is not validated; the
	// response still is.
	offDocument string
}

// conformance sends exchanges and validates them.
type conformance struct {
	doc        *openapi3.T
	router     routers.Router
	client     *http.Client
	exceptions []exception
	seen       map[string]map[int]bool // operationId -> statuses answered
}

func (c *conformance) check(t *testing.T, ex exchange) {
	t.Helper()
	var body []byte
	switch b := ex.body.(type) {
	case nil:
	case string:
		body = []byte(b)
	default:
		var err error
		body, err = json.Marshal(b)
		require.NoError(t, err)
	}
	req, err := newAgentRequest(ex.method, ex.path, ex.key)
	require.NoError(t, err)
	if body != nil {
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.ContentLength = int64(len(body))
		req.Header.Set("Content-Type", "application/json")
	}

	route, pathParams, err := c.router.FindRoute(req)
	require.NoError(t, err, "%s: the fake serves %s %s, which the document does not define", ex.name, ex.method, ex.path)
	input := &openapi3filter.RequestValidationInput{Request: req, PathParams: pathParams, Route: route}
	if ex.offDocument == "" {
		require.NoError(t, openapi3filter.ValidateRequest(context.Background(), input),
			"%s: the test's own request departs from the document", ex.name)
		req.Body = io.NopCloser(bytes.NewReader(body)) // validation read it
	}

	resp, err := c.client.Do(req)
	require.NoError(t, err, ex.name)
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, ex.status, resp.StatusCode, "%s: %s", ex.name, raw)

	op := route.Operation.OperationID
	if c.seen[op] == nil {
		c.seen[op] = map[int]bool{}
	}
	c.seen[op][resp.StatusCode] = true

	if exc, ok := c.exceptionFor(op, resp.StatusCode); ok {
		c.checkException(t, ex, route, exc, resp.Header, raw)
		return
	}
	assert.NoError(t, validateResponse(input, resp.StatusCode, resp.Header, raw),
		"%s: %s %s answered %d %s", ex.name, ex.method, ex.path, resp.StatusCode, raw)
}

// newAgentRequest is a request to the fake's in-memory host; path is
// under /api/v1 and key, if any, goes in X-API-Key.
func newAgentRequest(method, path, key string) (*http.Request, error) {
	req, err := http.NewRequest(method, "http://"+fakeband.Host+fakeband.APIPrefix+path, nil)
	if err == nil && key != "" {
		req.Header.Set("X-API-Key", key)
	}
	return req, err
}

// validateResponse checks an answer against the operation: a status the
// operation does not list is an error, as is any body not matching the
// status's schema.
func validateResponse(input *openapi3filter.RequestValidationInput, status int, header http.Header, body []byte) error {
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: input,
		Status:                 status,
		Header:                 header,
		Options: &openapi3filter.Options{
			IncludeResponseStatus:   true,
			MultiError:              true,
			SchemaValidationOptions: input.Route.Spec.GetSchemaValidationOptions(),
		},
	}
	out.SetBodyBytes(body)
	return openapi3filter.ValidateResponse(context.Background(), out)
}

// validate is validateResponse for a JSON body.
func validate(input *openapi3filter.RequestValidationInput, status int, body string) error {
	return validateResponse(input, status, http.Header{"Content-Type": {"application/json"}}, []byte(body))
}

func (c *conformance) exceptionFor(op string, status int) (exception, bool) {
	for _, e := range c.exceptions {
		if (e.op == "" && !slices.Contains(e.notFor, op) || e.op == op) && e.status == status {
			return e, true
		}
	}
	return exception{}, false
}

// checkException holds an exception to what it claims: the status really
// is undocumented (else the exception is stale and must go), and the body
// is what the exception says.
func (c *conformance) checkException(t *testing.T, ex exchange, route *routers.Route, exc exception, header http.Header, raw []byte) {
	t.Helper()
	assert.Nil(t, route.Operation.Responses.Status(exc.status),
		"%s: the document now lists %d for %s; drop the exception (%s)", ex.name, exc.status, route.Operation.OperationID, exc.why)
	if exc.body == "" {
		assert.Empty(t, raw, "%s: exception %d has no body", ex.name, exc.status)
		return
	}
	assert.Equal(t, "application/json", header.Get("Content-Type"), ex.name)
	schema := c.doc.Components.Schemas[exc.body]
	require.NotNil(t, schema, "no component schema %q", exc.body)
	var v any
	require.NoError(t, json.Unmarshal(raw, &v), "%s: %s", ex.name, raw)
	opts := append(c.doc.GetSchemaValidationOptions(), openapi3.EnableJSONSchema2020(), openapi3.MultiErrors())
	assert.NoError(t, schema.Value.VisitJSON(v, opts...), "%s: %s", ex.name, raw)
}

// requireEveryDocumentedStatus insists that each operation answered every
// status its documentation lists, so no documented answer goes unchecked.
func (c *conformance) requireEveryDocumentedStatus(t *testing.T, ops []string) {
	t.Helper()
	for _, id := range ops {
		op := c.operation(t, id)
		var documented []int
		for code := range op.Responses.Map() {
			n, err := strconv.Atoi(code)
			require.NoError(t, err, "%s documents response %q", id, code)
			documented = append(documented, n)
		}
		slices.Sort(documented)
		for _, status := range documented {
			assert.True(t, c.seen[id][status], "%s: documented status %d was never exercised", id, status)
		}
	}
}

func (c *conformance) operation(t *testing.T, id string) *openapi3.Operation {
	t.Helper()
	for _, item := range c.doc.Paths.Map() {
		for _, op := range item.Operations() {
			if op.OperationID == id {
				return op
			}
		}
	}
	t.Fatalf("the document has no operation %s", id)
	return nil
}
