//! Rows read into structs by column name, as sqlx's `FromRow` derive
//! reads them. The derive lives in sqlx's proc-macro crate, which compiles
//! sqlx with its SQLite and PostgreSQL drivers (and SQLite's C source) a
//! second time, for the machine that builds (that stack alone builds in
//! 114 s from nothing on two cores, part of it shared with other crates),
//! for a few lines each struct.

/// `sqlx::FromRow` on the generic driver's rows for `$ty`: each field
/// listed read from the column of its name, each field after `flatten`
/// read from the whole row by its own `FromRow`. The compiler holds the
/// list to the struct: a field left out or misspelt does not build.
macro_rules! from_row {
    ($ty:ty { $($field:ident),* $(,)? $(; flatten $($flat:ident),* $(,)?)? }) => {
        impl<'r> sqlx::FromRow<'r, sqlx::any::AnyRow> for $ty {
            fn from_row(row: &'r sqlx::any::AnyRow) -> Result<Self, sqlx::Error> {
                use sqlx::Row as _;
                Ok(Self {
                    $($field: row.try_get(stringify!($field))?,)*
                    $($($flat: sqlx::FromRow::from_row(row)?,)*)?
                })
            }
        }
    };
}

pub(crate) use from_row;
