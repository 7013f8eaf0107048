//! Types, a trait with a default method, and impls, in a module of the library.

use offload::declare_target;

pub trait Shape {
    fn area(&self) -> f64;
    fn scaled_area(&self, k: f64) -> f64 {
        self.area() * crate::sq(k)
    }
}

#[declare_target]
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct Circle {
    pub r: f64,
}

#[declare_target]
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct Rect {
    pub w: f64,
    pub h: f64,
}

impl Circle {
    pub fn new(r: f64) -> Self {
        Circle { r }
    }
}

impl Shape for Circle {
    fn area(&self) -> f64 {
        core::f64::consts::PI * crate::sq(self.r)
    }
}

impl Shape for Rect {
    fn area(&self) -> f64 {
        self.w * self.h
    }
}
