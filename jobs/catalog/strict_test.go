package catalog

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const strictYAML = `
tools:
  - name: tickets.create
    description: Create a ticket
    effect: write
    params_schema:
      type: object
      additionalProperties: false
      required: [subject]
      properties:
        subject: {type: string, maxLength: 200}
        priority: {type: string, enum: [low, high], description: Defaults to low}
        note: {type: [string, "null"]}
        watchers:
          type: array
          items:
            type: object
            additionalProperties: false
            required: [email]
            properties:
              email: {type: string, format: email}
              name: {type: string}
        origin:
          type: object
          properties:
            system: {type: string}
    http: {url: "http://127.0.0.1:9/tickets"}
  - name: notes.add
    description: Add a note
    effect: write
    params_schema:
      type: object
      properties:
        labels: {type: object}
    http: {url: "http://127.0.0.1:9/notes"}
  - name: notes.tag
    description: Tag a note
    effect: write
    params_schema:
      type: object
      properties:
        tag: {anyOf: [{type: string}, {type: integer}]}
    http: {url: "http://127.0.0.1:9/tags"}
`

func strictCatalog(t *testing.T) *Catalog {
	t.Helper()
	c, err := Load([]byte(strictYAML))
	require.NoError(t, err)
	return c
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// TestStrictParameters: every member required, every object closed, each optional member that
// refused null now nullable; a member that already allowed null is only made required.
func TestStrictParameters(t *testing.T) {
	t.Parallel()
	c := strictCatalog(t)
	create, _ := c.Get("tickets.create")
	before := jsonOf(t, create.ParamsSchemaRaw)
	s, ok := create.StrictParameters()
	require.True(t, ok)
	assert.JSONEq(t, `{
	  "type": "object", "additionalProperties": false,
	  "required": ["note", "origin", "priority", "subject", "watchers"],
	  "properties": {
	    "subject": {"type": "string", "maxLength": 200},
	    "priority": {"type": ["string", "null"], "enum": ["low", "high", null], "description": "Defaults to low"},
	    "note": {"type": ["string", "null"]},
	    "watchers": {"type": ["array", "null"], "items": {
	      "type": "object", "additionalProperties": false, "required": ["email", "name"],
	      "properties": {"email": {"type": "string", "format": "email"}, "name": {"type": ["string", "null"]}}}},
	    "origin": {"type": ["object", "null"], "additionalProperties": false, "required": ["system"],
	      "properties": {"system": {"type": ["string", "null"]}}}
	  }}`, jsonOf(t, s))
	assert.JSONEq(t, before, jsonOf(t, create.ParamsSchemaRaw), "the schema as written is unchanged")

	// The strict schema accepts what a strict model sends, and the tool reads it as meant.
	sent := `{"subject":"s","priority":null,"note":null,"watchers":[{"email":"a@example.com","name":null}],"origin":{"system":null}}`
	params, dropped, err := create.DropAbsentNulls([]byte(sent))
	require.NoError(t, err)
	assert.True(t, dropped)
	assert.JSONEq(t, `{"subject":"s","note":null,"watchers":[{"email":"a@example.com"}],"origin":{}}`, string(params))
	assert.Empty(t, create.ValidateParams(decode(t, string(params))))
}

// TestStrictParametersFallBack: a schema strict mode cannot express is offered as written.
func TestStrictParametersFallBack(t *testing.T) {
	t.Parallel()
	c := strictCatalog(t)
	for _, name := range []string{"notes.add", "notes.tag"} {
		tl, _ := c.Get(name)
		s, ok := tl.StrictParameters()
		assert.False(t, ok, name)
		assert.Equal(t, jsonOf(t, tl.ParamsSchemaRaw), jsonOf(t, s), name)
	}
}

// TestDropAbsentNulls: only nulls that the schema refuses for a member it does not require
// are removed; {"a": null} and {} are then one request.
func TestDropAbsentNulls(t *testing.T) {
	t.Parallel()
	c := strictCatalog(t)
	create, _ := c.Get("tickets.create")
	tests := []struct {
		in, want string
		dropped  bool
	}{
		{`{"priority":null,"subject":"s"}`, `{"subject":"s"}`, true},
		{`{"subject":null}`, `{"subject":null}`, false},                       // required: stays, and fails the schema
		{`{"note":null,"subject":"s"}`, `{"note":null,"subject":"s"}`, false}, // null is a value of note
		{`{"subject":"null"}`, `{"subject":"null"}`, false},
		{`{"subject":"s"}`, `{"subject":"s"}`, false},
		{`{"other":null,"subject":"s"}`, `{"other":null,"subject":"s"}`, false}, // not declared: not ours to read
	}
	for _, tc := range tests {
		got, dropped, err := create.DropAbsentNulls([]byte(tc.in))
		require.NoError(t, err)
		assert.Equal(t, tc.dropped, dropped, tc.in)
		assert.JSONEq(t, tc.want, string(got), tc.in)
	}
	req, _, err := create.DropAbsentNulls([]byte(`{"subject":null}`))
	require.NoError(t, err)
	assert.NotEmpty(t, create.ValidateParams(decode(t, string(req))), "a null for a required param is still refused")

	// A tool built by hand has no analysis and keeps every null.
	hand := &Tool{Name: "x"}
	got, dropped, err := hand.DropAbsentNulls([]byte(`{"a":null}`))
	require.NoError(t, err)
	assert.False(t, dropped)
	assert.Equal(t, `{"a":null}`, string(got))
}

// TestOpenAIFormats: Chat Completions nests the function, the Responses API is flat and
// always says strict; strict=true uses StrictParameters where it can.
func TestOpenAIFormats(t *testing.T) {
	t.Parallel()
	c := strictCatalog(t)
	create, _ := c.Get("tickets.create")
	tag, _ := c.Get("notes.tag")
	tools := []*Tool{create, tag}
	strictCreate, _ := create.StrictParameters()
	raw := func(tl *Tool) string { return jsonOf(t, tl.ParamsSchemaRaw) }

	chat, err := Definitions(tools, Format{Name: FormatOpenAI})
	require.NoError(t, err)
	assert.JSONEq(t, `{"tools":[
	  {"type":"function","function":{"name":"tickets__create","description":"Create a ticket","parameters":`+raw(create)+`}},
	  {"type":"function","function":{"name":"notes__tag","description":"Tag a note","parameters":`+raw(tag)+`}}]}`, jsonOf(t, chat))

	chatStrict, err := Definitions(tools, Format{Name: FormatOpenAI, API: OpenAIChatCompletions, Strict: true})
	require.NoError(t, err)
	assert.JSONEq(t, `{"tools":[
	  {"type":"function","function":{"name":"tickets__create","description":"Create a ticket","parameters":`+jsonOf(t, strictCreate)+`,"strict":true}},
	  {"type":"function","function":{"name":"notes__tag","description":"Tag a note","parameters":`+raw(tag)+`,"strict":false}}]}`, jsonOf(t, chatStrict))

	responses, err := Definitions(tools, Format{Name: FormatOpenAI, API: OpenAIResponses})
	require.NoError(t, err)
	assert.JSONEq(t, `{"tools":[
	  {"type":"function","name":"tickets__create","description":"Create a ticket","parameters":`+raw(create)+`,"strict":false},
	  {"type":"function","name":"notes__tag","description":"Tag a note","parameters":`+raw(tag)+`,"strict":false}]}`, jsonOf(t, responses))

	responsesStrict, err := Definitions(tools, Format{Name: FormatOpenAI, API: OpenAIResponses, Strict: true})
	require.NoError(t, err)
	assert.JSONEq(t, `{"tools":[
	  {"type":"function","name":"tickets__create","description":"Create a ticket","parameters":`+jsonOf(t, strictCreate)+`,"strict":true},
	  {"type":"function","name":"notes__tag","description":"Tag a note","parameters":`+raw(tag)+`,"strict":false}]}`, jsonOf(t, responsesStrict))
}
