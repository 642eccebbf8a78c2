/*
 * idemgate.pml: the protocol that decides who may run an operation and what its outcome is,
 * as the Go code does it, for one idempotency key. Checked with spin (docs/model/check.sh);
 * docs/model/README.md says what is modelled, what is assumed, and how each step maps to code.
 *
 * Every database transaction of the ledger is one atomic step here (each is one transaction,
 * with compare-and-set writes, in models/). Between transactions a gateway process can be
 * SIGKILLed: its goroutines stop where they are and their memory is lost; the ledger and the
 * downstream keep what they have. Time is a clock of ticks; every deadline is a countdown the
 * Clock process decrements.
 *
 * Configuration (spin -D...):
 *   KEYED=1  the downstream honours the idempotency key (tickets.create): RetrySafe, no look-up
 *            before sending (catalog.Tool.RetrySafe, ChecksBeforeSending).
 *   KEYED=0  it does not (refunds.issue): ambiguous attempts go to UNKNOWN, and each attempt
 *            first looks the downstream key up (jobs/lookfirst.go); with LOOKFIRST=0 the
 *            look-up names the operation id and is not asked first (ChecksBeforeSending).
 *   NG       gateway processes (2 or 3).
 * Mutations, each of which must produce a counterexample:
 *   MUT_NOFENCE           FinishAttempt's write without its fence: neither the fencing token nor
 *                         "the attempt row is still open" is checked, only the state.
 *   MUT_REAPER_RETRY      the lease reaper puts a tool without key support back to PENDING
 *                         (retry) instead of UNKNOWN (reconcile).
 *   MUT_SETTLE            the reconciler counts a "not found" before the settle window passed.
 *   MUT_SETTLE_AT_RECORD  the settle window measured when the probe result is recorded, not
 *                         when the downstream was asked (bug (a), fixed in jobs/recovery.go ask).
 *   MUT_REVIEW_STALE      a reviewer's action checked against the state only, not the attempt
 *                         count the reviewer saw (bug (b), fixed in models/review_actions.go act).
 *   MUT_REJECT_FINAL      a 4xx answer to a retry of an ambiguous attempt ends FAILED_FINAL
 *                         (bug (c), fixed in jobs/policy.go Decide and models FinishAttempt).
 *   MUT_CANCEL_AMBIGUOUS  cancel ends a PENDING retry of an ambiguous attempt (bug (d), fixed in
 *                         models/attempts.go Cancel).
 *   MUT_LATE_CLOSE        the old rule: a request that timed out is closed, not reset, so the
 *                         kernel keeps sending it from the orphaned socket and it can arrive at
 *                         any time later (issue 48; fixed in jobs/downstream abort.go).
 *   MUT_SETTLE_FROM_START the settle window of an attempt that timed out counted from the
 *                         attempt's start, not from the abort of its connection (fixed in
 *                         models/attempts.go settleFrom, jobs/downstream Response.AbortedAt).
 *   MUT_BATCH_JOIN_OP     with BATCH: a batch of outcomes checks and writes by operation only,
 *                         so the late outcome of a reaped attempt, sharing a batch with its
 *                         retry's, is written too (issue 47; fixed in models/groupcommit.go
 *                         outcomeBatch). The batch of two members is modelled for NG 2.
 *   NO_PAUSE_BOUND        drops the timing assumption (a live process sends its request within
 *                         its lease): shows why the lease margin matters. Informational.
 */

#ifndef KEYED
#define KEYED 1
#endif
#ifndef NG
#define NG 2
#endif
#ifndef LOOKFIRST
#define LOOKFIRST (KEYED == 0)   /* LOOKFIRST=0: the look-up names the operation id, not the key */
#endif
#ifndef NR
#define NR 1       /* reconcilers running (on gateways 0..NR-1) */
#endif
#ifndef MAXCRASH
#define MAXCRASH 1
#endif

/* Operation states (models/state.go); NONE: no row for the key yet. */
#define NONE     0
#define PENDING  1
#define RUNNING  2
#define UNKNOWN  3
#define SUCC     4
#define FAIL     5
#define terminal(s) ((s) == SUCC || (s) == FAIL)

/* Attempt outcome classes (jobs/policy.go Classify). */
#define C_SUCC   1
#define C_AMB    2   /* 500/502/504, reset or timeout after writing, unreadable 2xx body */
#define C_THROT  3   /* 429/503, and not_sent (never written): retried with backoff */
#define C_REJ    4   /* other 4xx */

/* Time, in ticks. A request can commit while its deadline has not passed (D, the tool's
 * timeout); at the deadline its connection is reset (the abort: SO_LINGER 0, and a socket
 * orphaned by a kill gives up by TCP_USER_TIMEOUT <= D), after which only what was already in
 * the network can still arrive, within NET ticks (the one timing assumption about the
 * network, docs/STATES.md); a commit is visible to look-ups at most VIS ticks later; the
 * settle window S, counted from the abort (or from the UNKNOWN that follows it), covers both
 * (S >= NET + VIS - 1, the tools file's reconcile.settle); a lease is the timeout plus the
 * margin (Executor.LeaseFor); a probe's claim lasts PL (Recovery.probeLease). */
#define D     1
#define NET   1
#define VIS   1
#define S     1
#define LEASE 2
#define PL    2

#define MAXPOL 2   /* retry.max_attempts */
#define NA     4   /* attempt numbers 1..3: two by policy, one more after a reviewer's retry */

/* The operation's row (models/records.go Operation). */
byte st = NONE;
/* The fencing token. Only its equality with the copies claims hold matters, so the model
 * keeps, per holder, whether its copy is still the current token: a claim bumps the token,
 * which invalidates every other copy (an ever-growing number would make the state space
 * infinite under repeated probes). */
bit  etok[NG];         /* executor g's claim holds the current token */
bit  rtok[NG];         /* reconciler g's probe holds the current token */
inline bump() {
	etok[0] = 0; etok[1] = 0; rtok[0] = 0; rtok[1] = 0;
#if NG > 2
	etok[2] = 0; rtok[2] = 0;
#endif
}
byte attempts;         /* number of the latest attempt */
bit  ambiguous;        /* some attempt was ambiguous */
bit  purged;           /* retention kept only the tombstone */
byte lease_left;       /* ticks until lease_expires_at */
byte settle_left;      /* ticks until unknown_since + settle */
byte probe_left;       /* ticks until next_probe_at */
bit  att_open[NA];     /* attempts rows: finished_at IS NULL */

/* The downstream. */
byte req_st[NA];       /* per attempt: the request it sent */
#define R_NONE     0
#define R_SENT     1   /* in flight: it may still arrive and commit while req_left > 0; its
                        * deadline has passed (and its connection was reset) once req_left <= NET */
#define R_ANSWERED 2
byte req_left[NA];
byte req_ans[NA];      /* the class of the answer the caller reads */
byte effects;          /* side effects committed for this operation */
bit  key_done;         /* KEYED: the downstream stored an answer under the key */
byte vis_left;         /* ticks until the last commit is visible to look-ups */
#define visible (effects > 0 && vis_left == 0)
#define inflight ((req_st[1] == R_SENT && req_left[1] > 0) || (req_st[2] == R_SENT && req_left[2] > 0) || \
                  (req_st[3] == R_SENT && req_left[3] > 0))

/* Gateways. A SIGKILL and the restart that follows are one event: the process's goroutines
 * stop where they are and what they held in memory is lost; the new process starts with
 * nothing. (A process that is down acts no differently from one that is up and idle, so
 * the model does not keep the time in between.) killE/killR tell the executor and the
 * reconciler of a gateway that they were killed. */
bit  killE[NG];
bit  killR[NG];
byte crashes;
byte wphase[NG];       /* 0 idle, 1 claimed and not yet sent, 2 sent */
bit  queued[NG];       /* BATCH: gateway g's executor waits in a batch (a claim or an outcome) */
/* BATCH: gateway g's outcome waiting in the batch, as the batch's statement holds it (its
 * attempt, the state it writes, its ambiguity), so that another member's commit can take it in
 * the same batch: two outcomes of the one operation, a reaped attempt's late one and its
 * retry's. joined[g]: g's outcome was decided in another member's batch. */
bit  qout[NG];
byte qmya[NG];
byte qto[NG];
bit  qamb[NG];
bit  joined[NG];

/* Ghosts: what the properties read. */
byte was_term;         /* the terminal state once reached */
bit  reviewer_failed;  /* a reviewer marked it failed (MarkFailed) */
byte reviews;          /* reviewer actions taken (a person decides once) */

/* The safety properties, checked after every step that changes the row or the downstream. */
inline check() {
	assert(effects <= 1);                                      /* at most one effect */
#ifndef DUP_ONLY   /* DUP_ONLY: a mutation's counterexample must be a second effect */
	assert(!(st == FAIL && effects > 0 && !reviewer_failed));  /* committed never FAILED_FINAL */
#endif
	assert(was_term == 0 || st == was_term);                   /* terminal never changes */
	if
	:: terminal(st) -> was_term = st
	:: else -> skip
	fi
}

/* Entering UNKNOWN (models/transition.go transition): the reconciler asks at once, the
 * settle window starts. */
inline to_unknown() {
	st = UNKNOWN; lease_left = 0; settle_left = S; probe_left = 0
}

/* The executor's UNKNOWN after its attempt: the window counts from the abort, which the
 * outcome write follows. MUT_SETTLE_FROM_START counts it from the attempt's start instead:
 * after a timeout (tmo) D ticks of it have already run. */
inline unknown_after_attempt() {
	to_unknown();
#ifdef MUT_SETTLE_FROM_START
	if
	:: tmo -> settle_left = (S > D -> S - D : 0)
	:: else -> skip
	fi
#endif
}

/* Leaving UNKNOWN or RUNNING for another state: the countdowns of the state left no longer
 * mean anything (the columns are cleared or ignored); zero them so equal states compare
 * equal. */
inline settle_to(s) {
	st = s; lease_left = 0; settle_left = 0; probe_left = 0
}

/* jobs/policy.go Decide, on the class of the attempt that just ended (cls), its number (mya)
 * and whether an earlier attempt was ambiguous (myamb); KEYED is catalog.Tool.RetrySafe. */
inline decide() {
	if
	:: cls == C_SUCC -> to = SUCC
	:: cls == C_REJ ->
#ifndef MUT_REJECT_FINAL
		if
		:: myamb -> to = UNKNOWN
		:: else -> to = FAIL
		fi
#else
		to = FAIL
#endif
	:: cls == C_AMB && !KEYED -> to = UNKNOWN
	:: else ->
		if
		:: mya >= MAXPOL && (myamb || cls == C_AMB) -> to = UNKNOWN
		:: mya >= MAXPOL && !(myamb || cls == C_AMB) -> to = FAIL
		:: else -> to = PENDING
		fi
	fi;
	myamb = myamb || cls == C_AMB;   /* what FinishAttempt writes to the ambiguous column */
	cls = 0
}

/* ---------------------------------------------------------------------------------------
 * The executor of gateway g: the request path (jobs/submit.go Executor.Submit, models
 * Ledger.Submit with a claim) and the dispatcher (models Ledger.ClaimDue), then the attempt
 * (jobs/executor.go run/attempt), its heartbeat (Ledger.ExtendLease) and its outcome write
 * (Ledger.FinishAttempt). What the executor computes in memory (classifying, deciding) is
 * folded into the step before it: a kill between the two loses the same thing.
 */
proctype Executor(byte g) {
	byte mya, cls, to;
	bit myamb, wasamb;
	bit tmo;     /* the attempt ended by its timeout (and the abort of its connection) */
	bit early;   /* MUT_BATCH_CHECK_EARLY: the outcome's check, made when it was queued */
	do
	:: true ->
		{
			if
			/* Ledger.Submit with Claim: the key is new; the row is created RUNNING with
			 * fence 1 and attempt 1 (the unique (tenant, key) decides the race). A key
			 * already there (even a tombstone) is answered from its row, changing nothing. */
#ifndef BATCH
			:: atomic { st == NONE ->
				st = RUNNING; bump(); etok[g] = 1; attempts = 1; att_open[1] = 1; lease_left = LEASE;
				mya = 1; myamb = 0; wphase[g] = 1; check() }
#else
			/* Group commit (models/groupcommit.go claimBatch): the look-up missed, and the
			 * claim joins the process's next batch; other processes act before it commits,
			 * and a kill before then loses the batch with the process. The batch's statement
			 * decides the key when it runs: new, the row is created and claimed; taken
			 * meanwhile (another gateway, or an earlier row of the same batch), nothing of
			 * this request is written. Its answer may be lost after the commit (503, "may
			 * have been recorded"), or the batch refused (nothing written): then this request
			 * holds nothing, whatever the row says, and runs nothing. */
			:: atomic { st == NONE -> queued[g] = 1 }
			   atomic {
				queued[g] = 0;
				if
				:: st == NONE ->
					st = RUNNING; bump(); etok[g] = 1; attempts = 1; att_open[1] = 1; lease_left = LEASE;
					mya = 1; myamb = 0; check();
					if
					:: wphase[g] = 1                       /* answered: the claim is this request's */
#ifndef MUT_BATCH_CUT_RUNS
					:: etok[g] = 0; mya = 0                /* the answer was lost */
#else
					:: wphase[g] = 1                       /* the answer was lost, and taken for "claimed" */
#endif
					fi
				:: st == NONE -> skip                      /* refused: nothing written */
#ifdef MUT_BATCH_CUT_RUNS
					; mya = 1; myamb = 0; wphase[g] = 1; etok[g] = 1   /* ... and taken for "claimed" */
#endif
				:: st != NONE -> skip                      /* the key was taken first */
				fi }
			   if
			   :: wphase[g] == 1 -> skip   /* holds the claim */
			   :: else -> goto over        /* answered without it: the request is over */
			   fi
#endif
			/* Ledger.ClaimDue (claim): PENDING and due → RUNNING, fence+1, attempt+1. */
			:: atomic { st == PENDING && attempts < NA - 1 ->   /* the model's bound */
				assert(!purged);                                /* a tombstone never runs */
				st = RUNNING; bump(); etok[g] = 1; attempts++; att_open[attempts] = 1; lease_left = LEASE;
				mya = attempts; myamb = ambiguous; wphase[g] = 1; check() }
			fi;
			wasamb = myamb;
			/* Executor.attempt: [lookFirst,] then connector.Do. */
			if
#if LOOKFIRST
			/* Executor.lookFirst: a tool without key support whose look-up names the
			 * downstream key asks first: 2xx → found, nothing sent (SUCCEEDED); no usable
			 * answer → not_sent; 404 → send. */
			:: atomic { visible -> cls = C_SUCC; decide() }
			:: atomic { cls = C_THROT; decide() }
#endif
			:: atomic { cls = C_THROT; decide() }                /* connection refused: not_sent */
			:: atomic {
#if LOOKFIRST
				!visible ->                                      /* the look-up's 404 */
#endif
#if KEYED == 0
				/* Property: a downstream without key support gets a request only when no
				 * earlier one of this operation took, or may still take, effect. */
				assert(effects == 0 && !inflight);
#endif
				req_st[mya] = R_SENT; req_left[mya] = D + NET; wphase[g] = 2 }
				do
				:: atomic { req_st[mya] == R_ANSWERED -> cls = req_ans[mya]; req_ans[mya] = 0; decide(); break }
				/* timeout: the connection was reset at the deadline (Connector.Do, abort.go) */
				:: atomic { req_st[mya] == R_SENT && req_left[mya] <= NET -> cls = C_AMB; tmo = 1; decide(); break }
				/* Executor.heartbeat → Ledger.ExtendLease: fenced, and the attempt open. */
				:: atomic { req_st[mya] == R_SENT && req_left[mya] > NET &&
				            st == RUNNING && etok[g] && att_open[mya] -> lease_left = LEASE }
				od
			fi;
			/* Ledger.FinishAttempt: the attempt row must be open and the fencing token the
			 * claim's; CodeStale drops the outcome whole. */
#ifdef BATCH
			/* Group commit (models/groupcommit.go outcomeBatch): the outcome joins the
			 * process's next batch; other processes act before it commits, and a kill before
			 * then loses it with the process. The batch checks each member's row when it
			 * locks it, at commit, and writes those that pass; a batch refused, or cut before
			 * its commit, writes nothing. Either way FinishAttempt then writes the outcome
			 * alone (the step after this one): the member the batch did not write (refused,
			 * stale: decided again alone), or the one whose answer was lost (executor.record
			 * retries), which the lone write finds closed and drops as stale. */
			atomic {
#ifndef MUT_REJECT_FINAL
				if
				:: to == FAIL && wasamb -> to = UNKNOWN
				:: else -> skip
				fi;
#endif
#ifdef MUT_BATCH_CHECK_EARLY
				early = (att_open[mya] && st == RUNNING && etok[g]);   /* checked when queued */
#endif
				qmya[g] = mya; qto[g] = to; qamb[g] = myamb; qout[g] = 1;
				queued[g] = 1 }
			atomic {
				queued[g] = 0; qout[g] = 0;
				if
				:: joined[g] -> joined[g] = 0   /* decided in the other member's batch */
				:: else ->
				if
#ifndef MUT_BATCH_CHECK_EARLY
				:: att_open[mya] && st == RUNNING && etok[g] ->
#else
				:: early ->
#endif
					att_open[mya] = 0;
					if
					:: to == UNKNOWN -> unknown_after_attempt()
					:: else -> settle_to(to)
					fi;
					ambiguous = myamb;
					check()
				:: true -> skip   /* refused or cut before the commit; or (guard false) stale */
				fi;
				/* The other gateway's outcome of the same operation may share this batch. Each
				 * member is written only on its own attempt's check (outcomeBatch joins every
				 * write by the member's attempt, and never batches two outcomes of one
				 * operation: the second is then decided alone, by the same check).
				 * MUT_BATCH_JOIN_OP: the batch checked by operation only, so once one member
				 * passed, every member of the operation was written too. */
				if
				:: qout[1 - g] ->
#ifndef MUT_BATCH_JOIN_OP
					if
					:: att_open[qmya[1 - g]] && st == RUNNING && etok[1 - g] ->
#else
					if
					:: st != RUNNING || !att_open[mya] ->   /* the batch wrote a member of the operation */
#endif
						att_open[qmya[1 - g]] = 0;
						if
						:: qto[1 - g] == UNKNOWN -> to_unknown()
						:: else -> settle_to(qto[1 - g])
						fi;
						ambiguous = qamb[1 - g];
						check()
					:: else -> skip
					fi;
					joined[1 - g] = 1; qout[1 - g] = 0
				:: true -> skip   /* not in this batch */
				fi
				fi;
				early = 0 }
#endif
			atomic {
#ifndef MUT_REJECT_FINAL
				/* An earlier attempt may have taken effect: never FAILED_FINAL from here. */
				if
				:: to == FAIL && wasamb -> to = UNKNOWN
				:: else -> skip
				fi;
#endif
#ifndef MUT_NOFENCE
				if
				:: att_open[mya] && st == RUNNING && etok[g] ->
#else
				if
				:: st == RUNNING ->
#endif
					att_open[mya] = 0;
					if
					:: to == UNKNOWN -> unknown_after_attempt()
					:: else -> settle_to(to)
					fi;
					ambiguous = myamb;
					check()
				:: else -> skip   /* CodeStale: the lease was lost */
				fi;
				wphase[g] = 0; etok[g] = 0; mya = 0; to = 0; myamb = 0; wasamb = 0; tmo = 0 }
over:		skip
		} unless { killE[g] };
		/* Killed (or done): everything in memory is gone. */
		atomic { killE[g] = 0; wphase[g] = 0; etok[g] = 0; mya = 0; cls = 0; to = 0; myamb = 0; wasamb = 0;
			queued[g] = 0; early = 0; tmo = 0;
#ifdef BATCH
			qout[g] = 0; joined[g] = 0; qmya[g] = 0; qto[g] = 0; qamb[g] = 0;
#endif
		}
	od
}

/* The lease reaper (jobs/recovery.go ReapOnce → Ledger.ReapExpiredLeases). Every gateway
 * runs one; a reap is one transaction and the reaper keeps nothing in memory, so one process
 * that runs while any gateway is up stands for all of them. */
proctype Reaper() {
	do
	:: atomic { st == RUNNING && lease_left == 0 ->
		att_open[attempts] = 0;   /* closed as ambiguous */
		ambiguous = 1;
#if defined(MUT_REAPER_RETRY) && KEYED == 0
		settle_to(PENDING);
#else
		to_unknown();
#endif
		check() }
	od
}

/* The reconciler of gateway g (jobs/recovery.go ReconcileOnce: Ledger.ClaimProbes, ask,
 * DecideProbe, Ledger.RecordProbe). */
proctype Reconciler(byte g) {
	bit found, failed, settled;
	do
	:: true ->
		{
			/* ClaimProbes: UNKNOWN and due; bumps the fence, pushes next_probe_at. */
			atomic { st == UNKNOWN && probe_left == 0 -> bump(); rtok[g] = 1; probe_left = PL }
			/* ask: the look-up by downstream key, and the time it was asked. */
			atomic {
				if
				:: found = visible; failed = 0
				:: found = 0; failed = 1    /* no usable answer */
				fi;
				settled = (settle_left == 0) }
			/* RecordProbe, fenced by the probe's token. */
			atomic {
#ifdef MUT_SETTLE_AT_RECORD
				settled = (settle_left == 0);
#endif
#ifdef MUT_SETTLE
				settled = 1;
#endif
				if
				:: st == UNKNOWN && rtok[g] ->
					if
					:: failed -> probe_left = 1                   /* ask again, backoff */
					:: !failed && found -> settle_to(SUCC)
					:: !failed && !found && settled && attempts < MAXPOL ->
						settle_to(PENDING); ambiguous = 0       /* proven not executed */
					:: !failed && !found && settled && attempts >= MAXPOL -> settle_to(FAIL)
					:: !failed && !found && !settled -> probe_left = settle_left
					fi;
					check()
				:: else -> skip                                   /* CodeStale */
				fi;
				rtok[g] = 0; found = 0; failed = 0; settled = 0 }
		} unless { killR[g] };
		atomic { killR[g] = 0; rtok[g] = 0; found = 0; failed = 0; settled = 0 }
	od
}

/* The downstream (internal/sandbox): as adversarial as the sandbox's fault modes. Faults
 * that commit nothing (error 500, throttle 429, unavailable 503, reject 422, hang, a reset)
 * strike before the key is even looked at; after the commit the answer may be lost (reset,
 * 500, hang). A request may be processed at any moment while it can still arrive: before its
 * deadline, even after its caller was killed (the orphaned socket gives up by
 * TCP_USER_TIMEOUT), and for NET ticks after the abort (what was already in the network). */
inline serve(i) {
	atomic { req_st[i] == R_SENT && req_left[i] > 0 ->
		if
		:: req_ans[i] = C_AMB                       /* 500, reset, hang: nothing committed */
		:: req_ans[i] = C_THROT                     /* 429, 503 */
		:: req_ans[i] = C_REJ                       /* 422 */
		:: true ->
			/* (explicit guards: an "else" here would be the outer if's) */
#if KEYED
			if
			:: key_done -> skip                     /* replays the stored answer */
			:: !key_done -> key_done = 1; effects++; vis_left = VIS
			fi;
#else
			effects++; vis_left = VIS;
#endif
			if
			:: req_ans[i] = C_SUCC
			:: req_ans[i] = C_AMB                   /* committed, answer lost */
			fi
		fi;
		req_st[i] = R_ANSWERED; req_left[i] = 0;
		check() }
}

proctype Downstream() {
	do
	:: serve(1)
	:: serve(2)
	:: serve(3)
	od
}

/* A reviewer (models/review_actions.go): reads the operation and the downstream, decides,
 * and acts later with the state and the attempt count seen (Action.ExpectedState,
 * ExpectedAttempts). A person decides right about what they saw, and acts once. */
proctype Reviewer() {
	byte seen;
	bit saw_effect, saw_none;
	atomic { st == UNKNOWN -> seen = attempts; saw_effect = visible; saw_none = (effects == 0 && !inflight) }
	atomic {
#ifndef MUT_REVIEW_STALE
		st == UNKNOWN && attempts == seen ->
#else
		st == UNKNOWN ->
#endif
		if
		:: saw_effect -> settle_to(SUCC)                            /* ConfirmSucceeded */
		:: saw_none -> settle_to(PENDING); ambiguous = 0            /* ConfirmNotExecuted */
		:: settle_to(FAIL); reviewer_failed = 1                     /* MarkFailed */
		:: probe_left = 0                                           /* ReconcileNow */
		fi;
		reviews++;
		check() }
}

/* The caller cancels (models/attempts.go Ledger.Cancel). */
proctype Canceller() {
	atomic {
#ifndef MUT_CANCEL_AMBIGUOUS
		st == PENDING && !ambiguous ->
#else
		st == PENDING ->
#endif
		settle_to(FAIL); check() }
}

/* Retention (jobs/recovery.go RetainOnce → Ledger.Purge): a terminal operation past its
 * retention keeps only its tombstone. */
proctype Retention() {
	atomic { terminal(st) && !purged -> purged = 1 }
}

/* Kills (and restarts) a gateway process at any step: SIGKILL. */
proctype Crasher() {
	do
	:: atomic { crashes < MAXCRASH -> killE[0] = 1; killR[0] = 1; crashes++ }
	:: atomic { crashes < MAXCRASH -> killE[1] = 1; killR[1] = 1; crashes++ }
#if NG > 2
	:: atomic { crashes < MAXCRASH -> killE[2] = 1; killR[2] = 1; crashes++ }
#endif
	od
}

/* The clock: every countdown moves one tick. Timing assumption (README): a live process that
 * holds a claim sends its request before its lease runs out (the lease margin covers its
 * pauses); the clock does not pass that point while it has not. */
proctype Clock() {
	byte i;
	do
	:: atomic {
#ifndef NO_PAUSE_BOUND
		!(st == RUNNING && lease_left <= 1 &&
		  ((!killE[0] && wphase[0] == 1 && etok[0]) ||
		   (!killE[1] && wphase[1] == 1 && etok[1])
#if NG > 2
		   || (!killE[2] && wphase[2] == 1 && etok[2])
#endif
		  )) ->
#endif
		if :: lease_left > 0 -> lease_left-- :: else -> skip fi;
		if :: settle_left > 0 -> settle_left-- :: else -> skip fi;
		if :: probe_left > 0 -> probe_left-- :: else -> skip fi;
		if :: vis_left > 0 -> vis_left-- :: else -> skip fi;
		i = 1;
		do
#ifndef MUT_LATE_CLOSE
		:: i < NA -> if :: req_left[i] > 0 -> req_left[i]-- :: else -> skip fi; i++
#else
		/* A plain close: the kernel retransmits the request for many minutes, longer than any
		 * settle window, so a request past its deadline can still arrive at any time. */
		:: i < NA -> if :: req_left[i] > 1 -> req_left[i]-- :: else -> skip fi; i++
#endif
		:: else -> i = 0; break
		od }
	od
}

init {
	byte g;
	atomic {
		do
		:: g < NG -> run Executor(g);
			if :: g < NR -> run Reconciler(g) :: else -> skip fi;
			g++
		:: else -> break
		od;
		g = 0;
		run Reaper(); run Downstream();
#ifndef NOREVIEW
		/* People: the bounded runs of check.sh leave them out to stay small (FULL=1 keeps
		 * them); they act only on operations that are not RUNNING. */
		run Reviewer(); run Canceller();
#endif
		run Retention();
		run Crasher(); run Clock()
	}
}

/* Progress (under weak fairness): no operation stays RUNNING forever. Kills are bounded
 * (MAXCRASH), so this is "once every process is up". */
ltl progress { [] ((st == RUNNING) -> <> (st != RUNNING)) }
