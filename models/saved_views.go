package models

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"gorm.io/gorm"
)

// The pages a view can be saved on.
const (
	ViewPageOperations = "operations"
	ViewPageReviews    = "reviews"
)

// SavedView is a filter of one console page, saved by a user under a name. It holds the
// filter's query string, never data: whoever opens it runs the filter within their own scope.
type SavedView struct {
	ID        string `gorm:"primaryKey"`
	Owner     string // the user's id
	Name      string
	Page      string // ViewPageOperations or ViewPageReviews
	Query     string // normalised: sorted, no empty values
	CreatedAt time.Time
}

// TableName keeps GORM off its pluralisation guesses.
func (SavedView) TableName() string { return "saved_views" }

// viewNameMax bounds a view's name, in characters.
const viewNameMax = 80

// notSaved are query names a view never keeps: a session's secrets, and the cursor of a page
// (a view is the filter, from its newest match).
var notSaved = []string{"csrf_token", "before"}

// SaveView saves query as owner's view name on page. A name owner already gave a view of that
// page is CodeConflict.
func (l *Ledger) SaveView(ctx context.Context, owner, page, name, query string) (*SavedView, error) {
	name = strings.TrimSpace(name)
	switch {
	case owner == "":
		return nil, errorf(CodeInvalid, "a view needs its owner")
	case page != ViewPageOperations && page != ViewPageReviews:
		return nil, errorf(CodeInvalid, "views are saved on the operations and reviews pages, not %q", page)
	case name == "":
		return nil, errorf(CodeInvalid, "a view needs a name")
	case utf8.RuneCountInString(name) > viewNameMax:
		return nil, errorf(CodeInvalid, "a view's name is at most %d characters", viewNameMax)
	}
	norm, err := normaliseQuery(query)
	if err != nil {
		return nil, err
	}
	v := &SavedView{ID: newID("view"), Owner: owner, Name: name, Page: page, Query: norm, CreatedAt: l.clock()}
	err = l.scope(ctx).Create(v).Error
	if errors.Is(err, gorm.ErrDuplicatedKey) || isUniqueViolation(err) {
		return nil, errorf(CodeConflict, "you already have a view named %q here", name)
	}
	if err != nil {
		return nil, unavailable("save view", err)
	}
	return v, nil
}

// normaliseQuery sorts query's names, drops empty values and the names a view never keeps.
func normaliseQuery(query string) (string, error) {
	q, err := url.ParseQuery(query)
	if err != nil {
		return "", errorf(CodeInvalid, "the filter cannot be read: %v", err)
	}
	for _, n := range notSaved {
		q.Del(n)
	}
	for n, vs := range q {
		kept := vs[:0]
		for _, v := range vs {
			if v = strings.TrimSpace(v); v != "" {
				kept = append(kept, v)
			}
		}
		if len(kept) == 0 {
			q.Del(n)
		} else {
			q[n] = kept
		}
	}
	return q.Encode(), nil // Encode sorts by name
}

// SavedViews lists owner's views of page, by name.
func (l *Ledger) SavedViews(ctx context.Context, owner, page string) ([]SavedView, error) {
	var out []SavedView
	err := l.scope(ctx).Where("owner = ? AND page = ?", owner, page).Order("name").Find(&out).Error
	if err != nil {
		return nil, unavailable("list saved views", err)
	}
	return out, nil
}

// SavedView returns the view id, whoever saved it: a view is shared by its link. Its filter
// is run by the page that opens it, in the opener's scope.
func (l *Ledger) SavedView(ctx context.Context, id string) (*SavedView, error) {
	var v SavedView
	err := l.scope(ctx).Where("id = ?", id).Take(&v).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, errorf(CodeNotFound, "no saved view %q", id)
	}
	if err != nil {
		return nil, unavailable("read saved view", err)
	}
	return &v, nil
}

// DeleteView deletes owner's view id and returns it. Someone else's view is CodeNotFound, as
// a missing one: only its owner deletes it.
func (l *Ledger) DeleteView(ctx context.Context, owner, id string) (*SavedView, error) {
	var v SavedView
	err := l.scope(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Where("id = ? AND owner = ?", id, owner).Take(&v).Error; err != nil {
			return err
		}
		return tx.Where("id = ? AND owner = ?", id, owner).Delete(&SavedView{}).Error
	})
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, errorf(CodeNotFound, "you have no saved view %q", id)
	}
	if err != nil {
		return nil, unavailable("delete saved view", err)
	}
	return &v, nil
}
