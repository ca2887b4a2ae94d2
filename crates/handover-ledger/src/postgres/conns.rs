//! The ledger's own connection pool.
//!
//! sqlx's pool pings every connection when it is returned (one extra round
//! trip per command, which a ledger command pays on top of its own three to
//! five). This pool skips that: a connection goes back only when the
//! command that used it finished cleanly ([`Conn::done`]); after an error,
//! or when the caller's future was dropped half-way (a cancelled call may
//! leave a half-written message or an open transaction), it is closed
//! instead. Broken connections therefore never come back, and a new one is
//! opened on demand.

use std::ops::{Deref, DerefMut};
use std::sync::Mutex;
use std::time::Duration;

use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, PgConnection};
use tokio::sync::{Semaphore, SemaphorePermit};

use super::error::describe;
use crate::error::LedgerError;

/// At most `max` connections, idle ones reused.
#[derive(Debug)]
pub(super) struct Conns {
    options: PgConnectOptions,
    idle: Mutex<Vec<PgConnection>>,
    slots: Semaphore,
    connect_timeout: Duration,
}

impl Conns {
    pub(super) fn new(options: PgConnectOptions, max: u32, connect_timeout: Duration) -> Self {
        Self {
            options,
            idle: Mutex::new(Vec::new()),
            slots: Semaphore::new(usize::try_from(max.max(1)).unwrap_or(1)),
            connect_timeout,
        }
    }

    /// A connection: an idle one, or a new one. Waiting for a free slot and
    /// connecting together take at most the connect timeout.
    pub(super) async fn get(&self) -> Result<Conn<'_>, LedgerError> {
        let wait = async {
            let permit =
                self.slots.acquire().await.map_err(|_| {
                    LedgerError::unavailable("acquiring a connection", "ledger closed")
                })?;
            let idle = self.idle.lock().map(|mut v| v.pop()).unwrap_or(None);
            let conn = match idle {
                Some(c) => c,
                None => self.options.connect().await.map_err(|e| {
                    LedgerError::unavailable("connecting to PostgreSQL", describe(&e))
                })?,
            };
            Ok::<_, LedgerError>(Conn {
                conn: Some(conn),
                home: self,
                reusable: false,
                _slot: permit,
            })
        };
        tokio::time::timeout(self.connect_timeout, wait)
            .await
            .map_err(|_| {
                LedgerError::unavailable(
                    "acquiring a connection",
                    "timed out waiting for a free connection or for the server",
                )
            })?
    }

    /// Closes every idle connection and refuses new work.
    pub(super) async fn close(&self) {
        self.slots.close();
        let idle: Vec<PgConnection> = self
            .idle
            .lock()
            .map(|mut v| std::mem::take(&mut *v))
            .unwrap_or_default();
        for c in idle {
            let _ = sqlx::Connection::close(c).await;
        }
    }
}

/// A connection lent by [`Conns`]; closed on drop unless [`Conn::done`] was called.
pub(super) struct Conn<'a> {
    conn: Option<PgConnection>,
    home: &'a Conns,
    reusable: bool,
    _slot: SemaphorePermit<'a>,
}

impl Conn<'_> {
    /// The command finished cleanly (no error, no open transaction): the
    /// connection may be reused.
    pub(super) fn done(mut self) {
        self.reusable = true;
    }
}

impl Deref for Conn<'_> {
    type Target = PgConnection;
    fn deref(&self) -> &PgConnection {
        self.conn.as_ref().expect("present until drop")
    }
}

impl DerefMut for Conn<'_> {
    fn deref_mut(&mut self) -> &mut PgConnection {
        self.conn.as_mut().expect("present until drop")
    }
}

impl Drop for Conn<'_> {
    fn drop(&mut self) {
        let Some(conn) = self.conn.take() else {
            return;
        };
        if self.reusable
            && let Ok(mut idle) = self.home.idle.lock()
        {
            idle.push(conn);
        }
        // Otherwise dropped: the socket closes and the server rolls back
        // whatever was open.
    }
}
