(function(){
function all(sel){if(sel===document||sel instanceof Element)return[sel];try{return Array.from(document.querySelectorAll(sel));}catch(e){return[];}}
function cell(v){return v==null?"":String(v);}
function table(el,opts){if(typeof opts!=="object")return;var cols=opts.columns||[],data=opts.data||[];
 var h="<thead><tr>"+cols.map(function(c){return"<th>"+cell(c.title)+"</th>";}).join("")+"</tr></thead><tbody>";
 data.forEach(function(r){var link=r._table_row_link_path;h+="<tr"+(link?' class="clickable-row" data-href="'+link+'"':"")+">"+
  cols.map(function(c){var v=cell(r[c.field]);return"<td>"+(link&&c.field==="run_name"?'<a href="'+link+'">'+v+"</a>":v)+"</td>";}).join("")+"</tr>";});
 el.innerHTML=h+"</tbody>";
 el.querySelectorAll("tr[data-href]").forEach(function(tr){tr.addEventListener("click",function(){location.href=tr.dataset.href;});});}
function wrap(els){var w={length:els.length,
 ready:function(f){document.readyState==="loading"?document.addEventListener("DOMContentLoaded",f):f();return w;},
 on:function(){return w;},removeClass:function(c){els.forEach(function(e){e.classList.remove(c);});return w;},
 bootstrapTable:function(o){els.forEach(function(e){table(e,o);});return w;},modal:function(){return w;},
 fadeIn:function(){els.forEach(function(e){e.style.display="";});return w;},fadeOut:function(){els.forEach(function(e){e.style.display="none";});return w;},
 parent:function(){return wrap(els.map(function(e){return e.parentElement;}).filter(Boolean));}};return w;}
window.$=window.jQuery=function(s){return typeof s==="function"?wrap([document]).ready(s):wrap(all(s));};
document.addEventListener("click",function(ev){var a=ev.target.closest("[data-toggle]");if(!a)return;
 var kind=a.getAttribute("data-toggle"),target=document.querySelector(a.getAttribute("href")||a.getAttribute("data-target")||"#none");
 if(kind==="tab"&&target){ev.preventDefault();a.closest(".nav").querySelectorAll(".nav-link").forEach(function(l){l.classList.remove("active");});
  a.classList.add("active");Array.from(target.parentElement.children).forEach(function(p){p.classList.remove("active","show");});target.classList.add("active","show");}
 if(kind==="collapse"&&target){ev.preventDefault();target.classList.toggle("show");}});
})();
