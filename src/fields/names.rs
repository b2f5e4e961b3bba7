//! `names!`: the one way to declare a closed set of names (an enum whose values travel as
//! strings): the enum, `ALL`, `NAMES`, `name()`, `parse()`, serde (as the name), its OpenAPI
//! schema (a string enum), and [`Names`] so a field of the kit can take it. And
//! `request_body!`: a request body's OpenAPI type, made from a [`Body`](super::Body) table.

/// A closed set of names, as `names!` declares it.
pub trait Names: utoipa::ToSchema + Copy + 'static {
    const ALL: &'static [Self];
    const NAMES: &'static [&'static str];
    fn name(self) -> &'static str;
    fn parse(s: &str) -> Option<Self>;
}

pub(super) fn names_of<T: Names>() -> &'static [&'static str] {
    T::NAMES
}

/// Declares a closed set of names:
///
/// ```ignore
/// names! {
///     /// Where a contact came from.
///     Source { Manual = "manual", Import = "import" }
/// }
/// ```
///
/// Doc comments come first; `derive(...)` may add derives (`PartialOrd, Ord`).
macro_rules! names {
    (
        $(#[doc = $doc:literal])*
        $(derive($($extra:path),*))?
        $vis:vis $name:ident { $($variant:ident = $text:literal),+ $(,)? }
    ) => {
        $(#[doc = $doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash $($(, $extra)*)?)]
        $vis enum $name {
            $($variant),+
        }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];
            pub const NAMES: &'static [&'static str] = &[$($text),+];

            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }

            pub fn parse(s: &str) -> Option<$name> {
                match s {
                    $($text => Some($name::$variant),)+
                    _ => None,
                }
            }

            /// The names, comma-separated, for error messages.
            pub fn names() -> String {
                $name::NAMES.join(", ")
            }
        }

        impl $crate::fields::Names for $name {
            const ALL: &'static [$name] = $name::ALL;
            const NAMES: &'static [&'static str] = $name::NAMES;
            fn name(self) -> &'static str {
                $name::name(self)
            }
            fn parse(s: &str) -> Option<$name> {
                $name::parse(s)
            }
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.name())
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct Visitor;
                impl ::serde::de::Visitor<'_> for Visitor {
                    type Value = $name;
                    fn expecting(&self, f: &mut ::std::fmt::Formatter) -> ::std::fmt::Result {
                        write!(f, "one of: {}", $name::names())
                    }
                    fn visit_str<E: ::serde::de::Error>(self, s: &str) -> Result<$name, E> {
                        $name::parse(s).ok_or_else(|| E::unknown_variant(s, $name::NAMES))
                    }
                }
                d.deserialize_str(Visitor)
            }
        }

        impl ::utoipa::PartialSchema for $name {
            fn schema() -> ::utoipa::openapi::RefOr<::utoipa::openapi::schema::Schema> {
                let doc: &[&str] = &[$($doc),*];
                let doc = doc.iter().map(|l| l.trim()).collect::<Vec<_>>().join("\n");
                ::utoipa::openapi::schema::ObjectBuilder::new()
                    .schema_type(::utoipa::openapi::schema::Type::String)
                    .description(Some(doc).filter(|d| !d.is_empty()))
                    .enum_values(Some($name::NAMES.iter().copied()))
                    .into()
            }
        }

        impl ::utoipa::ToSchema for $name {
            fn name() -> ::std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }
        }
    };
}

/// Declares the OpenAPI type of a request body from its table (`Body`) and mode, for
/// `request_body(content = ...)`:
///
/// ```ignore
/// request_body! {
///     /// The body of a create.
///     ContactInput = model::CONTACT, Mode::Create
/// }
/// ```
///
/// The doc comment is the schema's description (the body's own `doc` when there is none).
macro_rules! request_body {
    ($(#[doc = $doc:literal])* $name:ident = $body:expr, $mode:expr) => {
        $(#[doc = $doc])*
        struct $name;

        impl ::utoipa::PartialSchema for $name {
            fn schema() -> ::utoipa::openapi::RefOr<::utoipa::openapi::schema::Schema> {
                let doc: &[&str] = &[$($doc),*];
                let doc = doc.iter().map(|l| l.trim()).collect::<Vec<_>>().join("\n");
                $crate::fields::schema(&$body, $mode, &doc)
            }
        }

        impl ::utoipa::ToSchema for $name {
            fn name() -> ::std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }

            fn schemas(
                out: &mut Vec<(
                    String,
                    ::utoipa::openapi::RefOr<::utoipa::openapi::schema::Schema>,
                )>,
            ) {
                $crate::fields::components(&$body, out)
            }
        }
    };
}

pub(crate) use {names, request_body};
