package views

import (
	"context"
	"net/url"
)

// PreferencesCookie holds a person's display preferences: not a secret, and read on every
// page (signed in or not) so that the server renders the chosen theme before the first paint.
const PreferencesCookie = "idemgate_prefs"

// Preferences are how a person likes pages shown: a colour scheme ("" follows the system,
// "light", "dark"), and times in the browser's zone instead of UTC.
type Preferences struct {
	Theme      string
	LocalTimes bool
	// Path is the page being shown, where the preferences form returns to.
	Path string
}

// ParsePreferences reads the cookie's value; anything it does not know is the default.
func ParsePreferences(cookie string) Preferences {
	q, _ := url.ParseQuery(cookie)
	var p Preferences
	if t := q.Get("theme"); t == "light" || t == "dark" {
		p.Theme = t
	}
	p.LocalTimes = q.Get("times") == "local"
	return p
}

// Cookie is the cookie's value for p.
func (p Preferences) Cookie() string {
	q := url.Values{}
	if p.Theme != "" {
		q.Set("theme", p.Theme)
	}
	if p.LocalTimes {
		q.Set("times", "local")
	}
	return q.Encode()
}

// colorScheme is the color-scheme meta's content: the chosen scheme, or both.
func (p Preferences) colorScheme() string {
	if p.Theme == "" {
		return "light dark"
	}
	return p.Theme
}

type preferencesKey struct{}

// WithPreferences returns ctx carrying p, for the layout to render.
func WithPreferences(ctx context.Context, p Preferences) context.Context {
	return context.WithValue(ctx, preferencesKey{}, p)
}

// preferencesFrom returns the preferences ctx carries, or the defaults.
func preferencesFrom(ctx context.Context) Preferences {
	p, _ := ctx.Value(preferencesKey{}).(Preferences)
	return p
}

// themeOptions and timesOptions are the preferences form's choices, the current one selected.
func themeOptions(p Preferences) []Option {
	return []Option{{Value: "", Label: "System", Selected: p.Theme == ""},
		{Value: "light", Label: "Light", Selected: p.Theme == "light"},
		{Value: "dark", Label: "Dark", Selected: p.Theme == "dark"}}
}

func timesOptions(p Preferences) []Option {
	return []Option{{Value: "utc", Label: "UTC", Selected: !p.LocalTimes},
		{Value: "local", Label: "My time zone", Selected: p.LocalTimes}}
}
