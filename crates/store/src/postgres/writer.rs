//! The PostgreSQL store's writers: two crews (claims, records) taking turns at their queues,
//! each batch committed in a fast transaction (one pipeline, one round trip) and a careful one
//! (see the module docs of [`super`]). Reconnects when the database comes back.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_postgres::Client;

use super::sql::{
    Entries, Last, NewClaim, Pending, Sent, Statements, apply, in_order, record_writes,
};
use super::{RECONNECT_EVERY, Role, Shared, connect, describe, migrate, unavailable};
use crate::jobs::{self, Done, Job, Op};
use crate::records::{Claim, StoreError};

/// Most jobs in one transaction.
const MAX_BATCH: usize = 512;

/// How often idempotency records past their dedupe window, and tasks past their expiry, are
/// deleted.
const PRUNE_EVERY: Duration = Duration::from_secs(60);

/// The writer's connection and its prepared statements.
pub(super) struct Writer {
    client: Client,
    sql: Statements,
}

impl Writer {
    /// Connects writer `index` of the crew that takes `role`'s writes: migrates the database if
    /// it needs it, and prepares the statements.
    pub(super) async fn connect(shared: &Shared, role: Role, index: usize) -> Result<Self, String> {
        let mut client = connect(shared, &format!("{} writer {index}", role.name()))
            .await
            .map_err(|e| format!("cannot connect: {}", describe(&e)))?;
        migrate(&mut client).await?;
        let sql = Statements::prepare(&client, shared.chains).await?;
        Ok(Self { client, sql })
    }
}

/// `first`, then the jobs queued behind it, up to [`MAX_BATCH`]; while nobody waits on the
/// batch, also those that come within [`jobs::LINGER`].
async fn gather(first: Job, queue: &mut mpsc::UnboundedReceiver<Job>) -> Vec<Job> {
    let until = tokio::time::Instant::now() + jobs::LINGER;
    let mut waited = first.reply.is_some();
    let mut batch = vec![first];
    while batch.len() < MAX_BATCH {
        let next = match queue.try_recv() {
            Err(mpsc::error::TryRecvError::Empty) if !waited => {
                tokio::time::timeout_at(until, queue.recv())
                    .await
                    .ok()
                    .flatten()
            }
            queued => queued.ok(),
        };
        let Some(job) = next else { break };
        waited |= job.reply.is_some();
        batch.push(job);
    }
    batch
}

/// The writers of one [`Role`]: the queue they take their batches from, in turn, and what
/// they tell each other.
pub(super) struct Crew {
    pub(super) role: Role,
    queue: tokio::sync::Mutex<mpsc::UnboundedReceiver<Job>>,
    /// Held (shared) by each writer from taking a batch until it is answered; a barrier
    /// ([`Op::Flush`]) takes it alone, so it is answered after every batch taken before it.
    in_flight: tokio::sync::RwLock<()>,
    /// How many of them have a connection.
    pub(super) up: AtomicUsize,
}

impl Crew {
    pub(super) fn new(role: Role, queue: mpsc::UnboundedReceiver<Job>) -> Self {
        Self {
            role,
            queue: tokio::sync::Mutex::new(queue),
            in_flight: tokio::sync::RwLock::new(()),
            up: AtomicUsize::new(0),
        }
    }
}

/// A writer: group commit (see the module docs). Its crew's writers take turns at the queue:
/// one gathers a batch while the others commit theirs. Reconnects by itself when the database
/// comes back; while it is down, it leaves the jobs to a writer of its crew that is up, and
/// when none is, fails them at once.
pub(super) async fn write_loop(
    mut writer: Option<Writer>,
    crew: Arc<Crew>,
    index: usize,
    shared: Arc<Shared>,
) {
    let role = crew.role;
    let mut pruned: Option<std::time::Instant> = None;
    let mut retry = tokio::time::interval(RECONNECT_EVERY);
    retry.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Notices a lost database without waiting for a write, and finds it again.
    let check = async |writer: &mut Option<Writer>| match writer {
        Some(live) if live.client.is_closed() => {
            *writer = None;
            lost(&shared, &crew, index);
        }
        Some(_) => {}
        None => *writer = reconnect(&shared, &crew, index).await,
    };
    loop {
        if writer.is_none() && crew.up.load(Ordering::Acquire) > 0 {
            retry.tick().await;
            // The store is closing: the others finish the jobs queued.
            if crew.queue.try_lock().is_ok_and(|queue| queue.is_closed()) {
                return;
            }
            check(&mut writer).await;
            continue;
        }
        let mut queue = tokio::select! {
            queue = crew.queue.lock() => queue,
            _ = retry.tick() => {
                check(&mut writer).await;
                continue;
            }
        };
        let first = tokio::select! {
            job = queue.recv() => match job {
                Some(job) => job,
                None => return,
            },
            _ = retry.tick() => {
                drop(queue);
                check(&mut writer).await;
                continue;
            }
        };
        let mut batch = gather(first, &mut queue).await;
        // Taken while the queue is held, so a barrier taken after this batch waits for it.
        let in_flight = crew.in_flight.read().await;
        drop(queue);
        if writer.as_ref().is_some_and(|w| w.client.is_closed()) {
            writer = None;
            lost(&shared, &crew, index);
            // The others' connections hold: the database is there, and this batch need not
            // fail for one lost connection.
            if crew.up.load(Ordering::Acquire) > 0 {
                writer = reconnect(&shared, &crew, index).await;
            }
        }
        let Some(live) = writer.as_mut() else {
            let error = StoreError::Unavailable(format!(
                "{}: the database is unreachable; retrying every {} ms",
                shared.location,
                RECONNECT_EVERY.as_millis()
            ));
            answer(batch, (0..).map(|_| Err(error.clone())), &shared);
            continue;
        };
        if matches!(role, Role::Records)
            && index == 0
            && pruned.is_none_or(|at| at.elapsed() >= PRUNE_EVERY)
        {
            pruned = Some(std::time::Instant::now());
            batch.push(Job {
                op: Op::Prune(crate::records::now_ms()),
                reply: None,
            });
        }
        let results = run_batch(live, &batch, &shared.location).await;
        check(&mut writer).await;
        drop(in_flight);
        if batch.iter().any(|job| matches!(job.op, Op::Flush)) {
            drop(crew.in_flight.write().await);
        }
        answer(batch, results, &shared);
    }
}

/// Counts the writer down: the store is down while every writer of a crew is.
fn lost(shared: &Shared, crew: &Crew, index: usize) {
    let left = crew.up.fetch_sub(1, Ordering::AcqRel) - 1;
    if left == 0 {
        tracing::warn!(store = %shared.location, writer = crew.role.name(), index, "lost the connection to the database; calls that must be recorded fail until it is back");
    } else {
        tracing::warn!(store = %shared.location, writer = crew.role.name(), index, up = left, "a writer lost its connection to the database; the others of its crew take its jobs");
    }
}

/// Tries to connect the writer again; counts it up when it does.
async fn reconnect(shared: &Shared, crew: &Crew, index: usize) -> Option<Writer> {
    match Writer::connect(shared, crew.role, index).await {
        Ok(writer) => {
            tracing::info!(store = %shared.location, writer = crew.role.name(), index, "the database is back");
            crew.up.fetch_add(1, Ordering::AcqRel);
            // Keys may have been completed while nobody listened.
            shared.waiters.wake_all();
            Some(writer)
        }
        Err(error) => {
            tracing::debug!(%error, "the database is still unreachable");
            None
        }
    }
}

/// Sends every job its answer, waking the waiters of keys whose jobs committed.
fn answer(
    batch: Vec<Job>,
    results: impl IntoIterator<Item = Result<Done, StoreError>>,
    shared: &Shared,
) {
    for (job, result) in batch.into_iter().zip(results) {
        match &result {
            Ok(Done::Count(n)) if matches!(job.op, Op::Prune(_)) && *n > 0 => {
                tracing::info!(
                    pruned = n,
                    "forgot idempotency records and tasks past their expiry"
                );
            }
            Ok(_) => {
                if let Some(key) = job.op.wakes() {
                    shared.waiters.wake(key);
                }
            }
            Err(error) => jobs::log_failed_write(error),
        }
        if let Some(reply) = job.reply {
            let _ = reply.send(result);
        }
    }
}

/// Runs the batch: its claims and records in the fast transaction, then what that left (every
/// other job, and each claim of a key that already had a row) in the careful one. Every job
/// gets an answer.
async fn run_batch(
    writer: &mut Writer,
    batch: &[Job],
    location: &str,
) -> Vec<Result<Done, StoreError>> {
    let mut answers: Vec<Option<Result<Done, StoreError>>> = batch.iter().map(|_| None).collect();
    if batch
        .iter()
        .any(|job| matches!(job.op, Op::Claim(_) | Op::Record(_)))
    {
        match fast(writer, batch).await {
            Ok(done) => {
                for (answer, done) in answers.iter_mut().zip(done) {
                    *answer = done.map(Ok);
                }
            }
            Err(error) if writer.client.is_closed() => {
                let error = unavailable(location, &error);
                return batch.iter().map(|_| Err(error.clone())).collect();
            }
            Err(error) => {
                tracing::debug!(error = %describe(&error), "a batch's fast transaction failed; its jobs run in the careful one");
            }
        }
    }
    let left = in_lock_order(batch, (0..batch.len()).filter(|&i| answers[i].is_none()));
    if !left.is_empty() {
        let done = careful(writer, batch, &left, location).await;
        for (&i, done) in left.iter().zip(done) {
            answers[i] = Some(done);
        }
    }
    answers
        .into_iter()
        .map(|answer| answer.expect("the careful transaction answers every job left"))
        .collect()
}

/// `jobs` in the order their transaction locks their key rows: by key. So no two
/// transactions, of this gateway's writers or of another gateway's, lock two key rows in
/// opposite orders and deadlock (which PostgreSQL breaks only after `deadlock_timeout`, by
/// failing one of them).
fn in_lock_order(batch: &[Job], jobs: impl Iterator<Item = usize>) -> Vec<usize> {
    let row = |index: usize| {
        let op = &batch[index].op;
        match op {
            Op::Claim(request) => Some(&request.key),
            _ => op.wakes(),
        }
        .map(|key| (&key.tenant, &key.tool, &key.key))
    };
    let mut jobs: Vec<usize> = jobs.collect();
    jobs.sort_by_key(|&index| row(index));
    jobs
}

/// The fast transaction: every claim and record of the batch in one pipeline, so a batch
/// costs one round trip to the database whatever it holds: `BEGIN`; each claim as one insert of
/// a key nobody holds (row-level: gateways claiming different keys never wait on each other);
/// each record's key and approval updates and its notification; then every record's audit
/// entry, appended by the database (`gatehouse_append`, under the write lock); `COMMIT`.
///
/// The write lock is thus held only while the database appends and commits, never across a
/// round trip. A claim whose key already has a row inserts nothing; its answer is `None`, and
/// the careful transaction judges it (after this one, as if it had come later: its batch's
/// jobs are concurrent). A statement that fails aborts the transaction, whose `COMMIT` then
/// rolls it back.
async fn fast(writer: &Writer, batch: &[Job]) -> Result<Vec<Option<Done>>, tokio_postgres::Error> {
    let Writer { client, sql } = writer;
    let now = crate::records::now_ms();
    let entries = Entries::of(
        batch.iter().filter_map(|job| match &job.op {
            Op::Record(record) => Some(&record.audit),
            _ => None,
        }),
        sql.chains,
    );
    let params = entries.params();
    let mut pending: Vec<Pending<'_>> = Vec::new();
    pending.push(Box::pin(async {
        client.batch_execute("BEGIN").await.map(|()| Sent::Done)
    }));
    let mut claims = Vec::new();
    for index in in_lock_order(batch, 0..batch.len()) {
        let job = &batch[index];
        match &job.op {
            Op::Claim(request) => {
                claims.push((index, pending.len()));
                pending.push(Box::pin(async move {
                    let row = NewClaim::of(request, now);
                    client
                        .execute(&sql.new_key, &row.params())
                        .await
                        .map(Sent::Count)
                }));
            }
            Op::Record(record) => pending.extend(record_writes(client, sql, record, &job.op)),
            _ => {}
        }
    }
    if !entries.is_empty() {
        pending.push(Box::pin(async {
            client
                .query_one(&sql.append, &params)
                .await
                .map(|_| Sent::Done)
        }));
    }
    pending.push(Box::pin(async {
        client.batch_execute("COMMIT").await.map(|()| Sent::Done)
    }));
    let sent = match in_order(pending).await {
        Ok(sent) => sent,
        Err(error) => {
            if !client.is_closed() {
                // Its `COMMIT` rolled it back already; if that is what failed, make sure.
                let _ = client.batch_execute("ROLLBACK").await;
            }
            return Err(error);
        }
    };
    let mut done: Vec<Option<Done>> = batch
        .iter()
        .map(|job| matches!(job.op, Op::Record(_)).then_some(Done::Unit))
        .collect();
    for (index, at) in claims {
        if let Sent::Count(1) = sent[at] {
            done[index] = Some(Done::Claim(Claim::Run));
        }
    }
    Ok(done)
}

/// The careful transaction: the jobs the fast one left, one after another, each reading what
/// it decides on (a claim locks its key's row). Their audit entries and plugin changes are
/// written last, under the write lock ([`Last`]). If a job fails in SQL, the transaction is
/// rolled back and every job runs in a transaction of its own, so one bad job fails only itself.
async fn careful(
    writer: &mut Writer,
    batch: &[Job],
    jobs: &[usize],
    location: &str,
) -> Vec<Result<Done, StoreError>> {
    let Writer { client, sql } = writer;
    let together = async {
        let txn = client.transaction().await?;
        let mut last = Last::default();
        let mut answers = Vec::with_capacity(jobs.len());
        for &index in jobs {
            answers.push(apply(&txn, sql, &mut last, &batch[index].op).await?);
        }
        last.write(&txn, sql).await?;
        txn.commit().await?;
        Ok::<_, tokio_postgres::Error>(answers)
    };
    match together.await {
        Ok(answers) => return answers,
        Err(error) if client.is_closed() || jobs.len() == 1 => {
            let error = unavailable(location, &error);
            return jobs.iter().map(|_| Err(error.clone())).collect();
        }
        Err(error) => {
            tracing::debug!(error = %describe(&error), "a batch failed; running its jobs one by one");
        }
    }
    let mut answers = Vec::with_capacity(jobs.len());
    for &index in jobs {
        let alone = async {
            let txn = client.transaction().await?;
            let mut last = Last::default();
            let answer = apply(&txn, sql, &mut last, &batch[index].op).await?;
            last.write(&txn, sql).await?;
            txn.commit().await?;
            Ok::<_, tokio_postgres::Error>(answer)
        };
        answers.push(
            alone
                .await
                .unwrap_or_else(|e| Err(unavailable(location, &e))),
        );
    }
    answers
}
