package jobs

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net"
	"net/mail"
	"net/smtp"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
)

// MailerConfig wires the mailer: the emails the ledger writes when a review opens or an
// approval is about to lapse (models/mail.go) go out through an SMTP server.
type MailerConfig struct {
	Ledger *models.Ledger
	Worker string
	// SMTP is the server: smtp://[user@]host:port (STARTTLS when the server offers it) or
	// smtps://[user@]host:port (TLS from the start). Password is the user's password.
	SMTP     *url.URL
	Password string
	// PasswordFile, when set, holds the password on its first line instead (a {file: PATH}
	// secret reference): read for every SMTP session, so a rotated mounted secret applies at
	// once, without a restart.
	PasswordFile string
	From         string
	// Every is how often due emails are looked for (default 1 s); Timeout bounds one message's
	// exchange with the server (default 30 s); Window is how long one is retried (default 24 h).
	Every   time.Duration
	Timeout time.Duration
	Window  time.Duration
	// TLS, when set, is the client's TLS configuration (tests trust their own server with it).
	TLS *tls.Config
	Now func() time.Time
	Log *slog.Logger
}

// Mailer sends the ledger's emails: at least once each (a mailer that dies after the server
// took a message and before recording it sends it again, with the same Message-ID, which mail
// clients fold into one), never a second message for one review, recipient and event.
type Mailer struct{ cfg MailerConfig }

// NewMailer returns a mailer; Run sends until its context ends.
func NewMailer(cfg MailerConfig) *Mailer {
	cfg.Every = orDuration(cfg.Every, time.Second)
	cfg.Timeout = orDuration(cfg.Timeout, 30*time.Second)
	cfg.Window = orDuration(cfg.Window, 24*time.Hour)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Mailer{cfg: cfg}
}

// ParseSMTPURL checks --smtp-url: smtp:// or smtps://, a host and a port, no password in it.
func ParseSMTPURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "smtp" && u.Scheme != "smtps") || u.Hostname() == "" || u.Port() == "" {
		return nil, fmt.Errorf("--smtp-url %q: want smtp://[user@]host:port or smtps://[user@]host:port", raw)
	}
	if _, set := u.User.Password(); set {
		return nil, errors.New("--smtp-url: the password goes in IDEMGATE_SMTP_PASSWORD, never in the URL (a command line is visible to every user of the machine)")
	}
	return u, nil
}

// SMTPPassword is the SMTP user's password: PasswordFile's first line, read now, or Password.
// serve calls it once at start, so that a file it cannot read stops it there.
func (c *MailerConfig) SMTPPassword() (string, error) {
	if c.PasswordFile == "" {
		return c.Password, nil
	}
	return catalog.Secret{File: c.PasswordFile}.Resolve(nil)
}

// Run sends due emails every cfg.Every until ctx ends.
func (m *Mailer) Run(ctx context.Context) {
	t := time.NewTicker(m.cfg.Every)
	defer t.Stop()
	for {
		if _, err := m.SendOnce(ctx); err != nil && ctx.Err() == nil {
			m.cfg.Log.Warn("mailer: claiming emails failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// SendOnce claims the due emails and sends them, one SMTP session each, and returns how many.
func (m *Mailer) SendOnce(ctx context.Context) (int, error) {
	emails, err := m.cfg.Ledger.ClaimEmails(ctx, m.cfg.Worker, 200, m.cfg.Timeout+10*time.Second)
	if err != nil {
		return 0, err
	}
	// A message per email, but one per recipient for those who asked for a digest: every review
	// of theirs that came due together.
	var batches [][]models.Email
	digests := map[string]int{}
	for _, e := range emails {
		if !e.Digest {
			batches = append(batches, []models.Email{e})
			continue
		}
		i, ok := digests[e.Recipient]
		if !ok {
			i = len(batches)
			digests[e.Recipient] = i
			batches = append(batches, nil)
		}
		batches[i] = append(batches[i], e)
	}
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for _, batch := range batches {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			sendErr := m.send(ctx, batch)
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			for _, e := range batch {
				var next *time.Time
				if sendErr != nil && m.cfg.Now().Sub(e.CreatedAt) < m.cfg.Window {
					wait := min(time.Duration(1<<min(e.Attempts, 12))*5*time.Second, time.Hour)
					next = new(m.cfg.Now().Add(wait))
				}
				if err := m.cfg.Ledger.RecordEmail(rctx, e, sendErr, next); err != nil {
					m.cfg.Log.Warn("mailer: outcome not recorded; the email goes out again", "email_id", e.ID, "err", err)
				}
			}
			if sendErr != nil {
				m.cfg.Log.Warn("mailer: email not sent", "emails", len(batch), "recipient", batch[0].Recipient, "err", sendErr)
			}
		})
	}
	wg.Wait()
	return len(emails), nil
}

// send writes and sends one message: one email, or a recipient's digest of several.
func (m *Mailer) send(ctx context.Context, batch []models.Email) error {
	msgs := make([]message, len(batch))
	for i, e := range batch {
		msg, err := readMessage([]byte(e.Payload))
		if err != nil {
			return err
		}
		msgs[i] = msg
	}
	var body []byte
	if len(batch) == 1 && !batch[0].Digest {
		body = composeEmail(m.cfg.From, batch[0], msgs[0])
	} else {
		body = composeDigest(m.cfg.From, batch, msgs)
	}
	ctx, cancel := context.WithTimeout(ctx, m.cfg.Timeout)
	defer cancel()
	return m.deliver(ctx, batch[0].Recipient, body)
}

// composeDigest is a recipient's hourly message: every review of theirs that came due, each
// with its headline, why a person is needed and its link. Its Message-ID is made from the
// emails it carries, so a digest sent twice is one message to a mail client.
func composeDigest(from string, batch []models.Email, msgs []message) []byte {
	h := sha256.New()
	for _, e := range batch {
		h.Write([]byte(e.ID + "\x00"))
	}
	var b strings.Builder
	title := fmt.Sprintf("%d reviews need a person", len(batch))
	if len(batch) == 1 {
		title = "1 review needs a person"
	}
	writeHeaders(&b, from, batch[0].Recipient, title, hex.EncodeToString(h.Sum(nil)[:16]), batch[len(batch)-1].CreatedAt)
	line := func(s string) { b.WriteString(strings.ReplaceAll(s, "\n", "\r\n") + "\r\n") }
	line(title + ", in the hour's digest you chose.")
	for i, m := range msgs {
		line("")
		line(fmt.Sprintf("%d. %s", i+1, m.titled()))
		if m.Why != "" {
			line("   Why a person is needed: " + m.Why)
		}
		if m.Link != "" {
			line("   Open it: " + m.Link)
		}
	}
	line("")
	line("You get this because you review these tenants' operations. Change how you are emailed on the console's review queue.")
	return []byte(b.String())
}

// writeHeaders writes a plain-text UTF-8 message's headers, its Message-ID from id under the
// From address's domain.
func writeHeaders(b *strings.Builder, from, to, subject, id string, date time.Time) {
	domain := "idemgate.invalid"
	if a, err := mail.ParseAddress(from); err == nil {
		if _, d, ok := strings.Cut(a.Address, "@"); ok {
			domain = d
		}
	}
	header := func(k, v string) { fmt.Fprintf(b, "%s: %s\r\n", k, v) }
	header("From", from)
	header("To", to)
	header("Subject", mime.QEncoding.Encode("utf-8", "[idemgate] "+subject))
	header("Message-ID", "<"+id+"@"+domain+">")
	header("Date", date.UTC().Format(time.RFC1123Z))
	header("MIME-Version", "1.0")
	header("Content-Type", "text/plain; charset=utf-8")
	header("Content-Transfer-Encoding", "8bit")
	header("Auto-Submitted", "auto-generated")
	b.WriteString("\r\n")
}

// composeEmail is the message: plain text, UTF-8, one review, the summary in the subject, why a
// person is needed, the facts and the link. Its Message-ID is the review's, the event's and the
// recipient's, so a message sent twice is one message to a mail client.
func composeEmail(from string, e models.Email, m message) []byte {
	sum := sha256.Sum256([]byte(e.ReviewID + "\x00" + e.Event + "\x00" + e.Recipient))
	var b strings.Builder
	writeHeaders(&b, from, e.Recipient, m.titled(), hex.EncodeToString(sum[:16]), e.CreatedAt)
	line := func(s string) { b.WriteString(strings.ReplaceAll(s, "\n", "\r\n") + "\r\n") }
	line(m.Title)
	if m.Summary != "" {
		// The agent's words, quoted on a line that starts with idemgate's own: never a line of
		// their own, so never a fake "Open it:" or a lone ".".
		line("What the agent asked: \u201c" + m.Summary + "\u201d")
	}
	line("")
	if m.Why != "" {
		line("Why a person is needed: " + m.Why)
		line("")
	}
	for _, f := range m.Facts {
		line(f[0] + ": " + agentText(f[1]))
	}
	line("")
	if m.Link != "" {
		line("Open it: " + m.Link)
	} else {
		line("Find it in the console's review queue (no --public-url is set, so this message has no link).")
	}
	line("")
	line("You get this because you review this tenant's operations. Change how you are emailed (each review, an hourly digest, or none) on the console's review queue.")
	return []byte(b.String())
}

// deliver runs one SMTP session: TLS (smtps) or STARTTLS when offered, AUTH PLAIN when a user
// is named, then one message to one recipient.
func (m *Mailer) deliver(ctx context.Context, to string, msg []byte) error {
	u := m.cfg.SMTP
	addr := net.JoinHostPort(u.Hostname(), u.Port())
	tlsCfg := &tls.Config{ServerName: u.Hostname(), MinVersion: tls.VersionTLS12}
	if m.cfg.TLS != nil {
		tlsCfg = m.cfg.TLS.Clone()
	}
	d := &net.Dialer{}
	var conn net.Conn
	var err error
	if u.Scheme == "smtps" {
		conn, err = (&tls.Dialer{NetDialer: d, Config: tlsCfg}).DialContext(ctx, "tcp", addr)
	} else {
		conn, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return fmt.Errorf("connect to %s: %w", addr, err)
	}
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	c, err := smtp.NewClient(conn, u.Hostname())
	if err != nil {
		conn.Close()
		return fmt.Errorf("smtp %s: %w", addr, err)
	}
	defer c.Close()
	if u.Scheme == "smtp" {
		if ok, _ := c.Extension("STARTTLS"); ok {
			if err := c.StartTLS(tlsCfg); err != nil {
				return fmt.Errorf("smtp %s: STARTTLS: %w", addr, err)
			}
		}
	}
	if user := u.User.Username(); user != "" {
		password, err := m.cfg.SMTPPassword()
		if err != nil {
			return fmt.Errorf("smtp %s: AUTH: %w", addr, err)
		}
		if err := c.Auth(smtp.PlainAuth("", user, password, u.Hostname())); err != nil {
			return fmt.Errorf("smtp %s: AUTH: %w", addr, err)
		}
	}
	from, err := mail.ParseAddress(m.cfg.From)
	if err != nil {
		return fmt.Errorf("--smtp-from %q: %w", m.cfg.From, err)
	}
	if err := c.Mail(from.Address); err != nil {
		return fmt.Errorf("smtp MAIL FROM: %w", err)
	}
	if err := c.Rcpt(to); err != nil {
		return fmt.Errorf("smtp RCPT TO %s: %w", to, err)
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("smtp DATA: %w", err)
	}
	if _, err := w.Write(msg); err != nil {
		return fmt.Errorf("smtp DATA: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("smtp DATA: %w", err)
	}
	return c.Quit()
}
