package views

import (
	"fmt"
	"net/http"
)

// errorHeading is the heading of the error page for status.
func errorHeading(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "This request could not be handled"
	case http.StatusForbidden:
		return "You do not have access to this"
	case http.StatusNotFound:
		return "Page not found"
	case http.StatusConflict:
		return "Something changed meanwhile"
	case http.StatusTooManyRequests:
		return "Too many attempts"
	case http.StatusServiceUnavailable:
		return "Temporarily unavailable"
	}
	if status >= 500 || http.StatusText(status) == "" {
		return "Something went wrong"
	}
	return http.StatusText(status)
}

// errorMessage is the message the handler gave, or a default for status.
func errorMessage(status int, message string) string {
	if message != "" {
		return message
	}
	switch status {
	case http.StatusNotFound:
		return "This page does not exist, or it belongs to a tenant you do not have access to."
	case http.StatusForbidden:
		return "Your role does not allow this page or action."
	}
	if status >= 500 {
		return "The console failed while handling this page."
	}
	return fmt.Sprintf("The console could not handle this request (%s).", errorHeading(status))
}

// errorAdvice says what to do next, or "" when the heading and message say enough. After a
// server error the person may have been acting on money, so it says plainly how to find out
// whether their action took effect before they repeat it.
func errorAdvice(status int) string {
	switch {
	case status == http.StatusForbidden:
		return "If you need access, ask an admin."
	case status == http.StatusConflict:
		return "Open the page again to see the current state before you decide."
	case status == http.StatusTooManyRequests:
		return "Wait a minute, then try again."
	case status >= 500:
		return "If you were submitting an action, it may or may not have been recorded. Open the operation and check its state and timeline before you try again."
	}
	return ""
}

// ErrorHeading is the heading (and title) of the error page for status.
func ErrorHeading(status int) string { return errorHeading(status) }
