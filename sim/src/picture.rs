//! A picture of the simulated app's screen, drawn from the same snapshot
//! `screen` answers: each presented element in its frame, styled by kind,
//! with its text, value or placeholder; covered elements dimmed; the route
//! in a bar at the top. It stands in for `xcrun simctl io … screenshot`, so
//! that screenshots travel the whole grid without a simulator.

use argus_proto::wire::{Element, ElementKind, Frame, Screen};
use embedded_graphics::mono_font::MonoTextStyle;
use embedded_graphics::mono_font::ascii::{FONT_6X10, FONT_9X15};
use embedded_graphics::pixelcolor::Rgb888;
use embedded_graphics::prelude::*;
use embedded_graphics::primitives::{PrimitiveStyleBuilder, Rectangle, RoundedRectangle};
use embedded_graphics::text::{Baseline, Text};

/// Pictures are drawn one pixel per point, with a font sized for that.
const SCALE: u32 = 1;
/// Then each pixel is written as ZOOM × ZOOM, as a 2x device's screenshot is
/// sized: text stays as legible as the model's layout makes it.
const ZOOM: u32 = 2;
/// The largest side drawn, in points: a model's window is clamped to it.
const MAX_POINTS: u32 = 2048;

const BACKGROUND: Rgb888 = Rgb888::new(250, 250, 252);
const INK: Rgb888 = Rgb888::new(28, 28, 30);
const MUTED: Rgb888 = Rgb888::new(142, 142, 147);
const ACCENT: Rgb888 = Rgb888::new(0, 122, 255);
const LINE: Rgb888 = Rgb888::new(209, 209, 214);
const BAR: Rgb888 = Rgb888::new(242, 242, 247);

/// An RGB canvas that embedded-graphics draws on, clipped to its size.
struct Canvas {
    width: u32,
    height: u32,
    rgb: Vec<u8>,
}

impl Canvas {
    fn new(width: u32, height: u32) -> Self {
        let mut rgb = Vec::with_capacity((width * height * 3) as usize);
        for _ in 0..width * height {
            rgb.extend_from_slice(&[BACKGROUND.r(), BACKGROUND.g(), BACKGROUND.b()]);
        }
        Self { width, height, rgb }
    }

    /// Halves every pixel's distance to black where `area` lies: what a
    /// modal layer does to what it covers.
    fn dim(&mut self, area: Rectangle) {
        let Some(bottom_right) = area.bottom_right() else { return };
        for y in area.top_left.y.max(0)..=bottom_right.y.min(self.height as i32 - 1) {
            for x in area.top_left.x.max(0)..=bottom_right.x.min(self.width as i32 - 1) {
                let at = ((y as u32 * self.width + x as u32) * 3) as usize;
                for byte in &mut self.rgb[at..at + 3] {
                    *byte /= 2;
                }
            }
        }
    }
}

impl OriginDimensions for Canvas {
    fn size(&self) -> Size {
        Size::new(self.width, self.height)
    }
}

impl DrawTarget for Canvas {
    type Color = Rgb888;
    type Error = std::convert::Infallible;

    fn draw_iter<I: IntoIterator<Item = Pixel<Rgb888>>>(&mut self, pixels: I) -> Result<(), Self::Error> {
        for Pixel(point, color) in pixels {
            if point.x < 0 || point.y < 0 || point.x as u32 >= self.width || point.y as u32 >= self.height {
                continue;
            }
            let at = ((point.y as u32 * self.width + point.x as u32) * 3) as usize;
            self.rgb[at..at + 3].copy_from_slice(&[color.r(), color.g(), color.b()]);
        }
        Ok(())
    }
}

fn points(v: f64) -> i32 {
    (v.clamp(-1e6, 1e6) * f64::from(SCALE)).round() as i32
}

fn rect(frame: &Frame) -> Rectangle {
    let (w, h) = (points(frame.w).max(0) as u32, points(frame.h).max(0) as u32);
    Rectangle::new(Point::new(points(frame.x), points(frame.y)), Size::new(w, h))
}

/// What an element shows as text: its text, else its value, else its
/// placeholder (muted), else its label.
fn shown(element: &Element) -> Option<(&str, bool)> {
    fn non_empty(s: &Option<String>) -> Option<&str> {
        s.as_deref().filter(|s| !s.is_empty())
    }
    non_empty(&element.text)
        .map(|t| (t, false))
        .or_else(|| non_empty(&element.value).map(|t| (t, false)))
        .or_else(|| non_empty(&element.placeholder).map(|t| (t, true)))
        .or_else(|| non_empty(&element.accessibility_label).map(|t| (t, false)))
}

/// `text` cut to what fits in `width` pixels of `char_width` each.
fn fit(text: &str, width: i32, char_width: i32) -> String {
    let room = (width / char_width).max(0) as usize;
    let count = text.chars().count();
    if count <= room {
        return text.into();
    }
    let mut cut: String = text.chars().take(room.saturating_sub(1)).collect();
    cut.push('~');
    cut
}

fn draw_element(canvas: &mut Canvas, element: &Element) {
    let area = rect(&element.frame);
    let (fill, stroke) = match element.kind {
        ElementKind::Button => (Some(if element.enabled { ACCENT } else { LINE }), None),
        ElementKind::Input => (Some(Rgb888::WHITE), Some(LINE)),
        ElementKind::Switch => (Some(if element.value.as_deref() == Some("true") { ACCENT } else { LINE }), None),
        ElementKind::Image => (Some(LINE), None),
        ElementKind::Scroll | ElementKind::View => (None, Some(BAR)),
        ElementKind::Text => (None, None),
    };
    let mut style = PrimitiveStyleBuilder::new();
    if let Some(fill) = fill {
        style = style.fill_color(fill);
    }
    if let Some(stroke) = stroke {
        style = style.stroke_color(stroke).stroke_width(SCALE);
    }
    let radius = Size::new(8 * SCALE, 8 * SCALE);
    let _ = RoundedRectangle::with_equal_corners(area, radius).into_styled(style.build()).draw(canvas);
    let Some((text, placeholder)) = shown(element) else { return };
    let on_accent = fill == Some(ACCENT);
    let color = match () {
        _ if on_accent => Rgb888::WHITE,
        _ if placeholder || !element.enabled => MUTED,
        _ => INK,
    };
    let font = if area.size.height >= 20 { &FONT_9X15 } else { &FONT_6X10 };
    let char_width = font.character_size.width as i32 + font.character_spacing as i32;
    let pad = 6 * SCALE as i32;
    let line = fit(text, area.size.width as i32 - 2 * pad, char_width);
    let middle = area.top_left.y + area.size.height as i32 / 2;
    let at = Point::new(area.top_left.x + pad, middle);
    let _ = Text::with_baseline(&line, at, MonoTextStyle::new(font, color), Baseline::Middle).draw(canvas);
}

/// The picture of `screen`, as PNG bytes; the error says why the encoder
/// refused it.
pub fn png(screen: &Screen) -> Result<Vec<u8>, png::EncodingError> {
    let clamp = |v: f64| (v.round().max(1.0) as u32).min(MAX_POINTS) * SCALE;
    let (width, height) = (clamp(screen.window.w), clamp(screen.window.h));
    let mut canvas = Canvas::new(width, height);
    let presenting = screen.presenting.as_ref().and_then(|p| screen.elements.iter().find(|e| e.i == p.i));
    for element in screen.elements.iter().filter(|e| e.hidden.is_none()) {
        if let Some(layer) = presenting
            && element.i == layer.i
            && screen.presenting.as_ref().is_some_and(|p| p.modal)
        {
            // What the modal layer covers is dimmed before it is drawn.
            canvas.dim(Rectangle::new(Point::zero(), Size::new(width, height)));
        }
        draw_element(&mut canvas, element);
        if element.covered == Some(true) {
            canvas.dim(rect(&element.frame));
        }
    }
    if let Some(route) = &screen.route {
        let bar = Rectangle::new(Point::zero(), Size::new(width, 22 * SCALE));
        let _ = bar.into_styled(PrimitiveStyleBuilder::new().fill_color(BAR).build()).draw(&mut canvas);
        let style = MonoTextStyle::new(&FONT_9X15, MUTED);
        let _ = Text::with_baseline(route, Point::new(8 * SCALE as i32, 11 * SCALE as i32), style, Baseline::Middle)
            .draw(&mut canvas);
    }
    encode(&canvas)
}

fn encode(canvas: &Canvas) -> Result<Vec<u8>, png::EncodingError> {
    let (width, height) = (canvas.width * ZOOM, canvas.height * ZOOM);
    let mut zoomed = Vec::with_capacity((width * height * 3) as usize);
    for row in canvas.rgb.chunks_exact((canvas.width * 3) as usize) {
        let mut line = Vec::with_capacity((width * 3) as usize);
        for pixel in row.chunks_exact(3) {
            for _ in 0..ZOOM {
                line.extend_from_slice(pixel);
            }
        }
        for _ in 0..ZOOM {
            zoomed.extend_from_slice(&line);
        }
    }
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, width, height);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    encoder.set_compression(png::Compression::Fast);
    let mut writer = encoder.write_header()?;
    writer.write_image_data(&zoomed)?;
    writer.finish()?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use argus_proto::wire::Size as WindowSize;

    fn element(i: usize, kind: ElementKind, text: &str, frame: Frame) -> Element {
        serde_json::from_value(serde_json::json!({
            "i": i, "kind": kind.as_str(), "frame": frame, "enabled": true, "depth": 1, "text": text
        }))
        .unwrap()
    }

    fn decode(bytes: &[u8]) -> (png::OutputInfo, Vec<u8>) {
        let mut reader = png::Decoder::new(std::io::Cursor::new(bytes)).read_info().unwrap();
        let mut pixels = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut pixels).unwrap();
        (info, pixels)
    }

    #[test]
    fn a_screen_is_drawn_at_twice_its_window_with_its_elements_where_they_are() {
        let button = element(0, ElementKind::Button, "Log in", Frame { x: 20.0, y: 100.0, w: 350.0, h: 44.0 });
        let screen = Screen {
            route: Some("Home".into()),
            params: None,
            path: vec!["Home".into()],
            elements: vec![button],
            commit: 1,
            busy: false,
            window: WindowSize { w: 390.0, h: 844.0 },
            presenting: None,
            cost_ms: 0,
        };
        let bytes = png(&screen).unwrap();
        let (info, pixels) = decode(&bytes);
        assert_eq!((info.width, info.height), (780, 1688));
        let at = |x: u32, y: u32| {
            let i = ((y * info.width + x) * 3) as usize;
            [pixels[i], pixels[i + 1], pixels[i + 2]]
        };
        assert_eq!(at(50, 210), [ACCENT.r(), ACCENT.g(), ACCENT.b()], "inside the button, left of its text");
        assert_eq!(at(10, 400), [BACKGROUND.r(), BACKGROUND.g(), BACKGROUND.b()], "outside every element");
        let text_pixels = (40..740).filter(|x| at(*x, 244) == [255, 255, 255]).count();
        assert!(text_pixels > 0, "the button's label is drawn in white");
    }
}
