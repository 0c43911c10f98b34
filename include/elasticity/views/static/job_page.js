function ago(ms){var s=Math.round((Date.now()-ms)/1000),f=s<0?'in ':'',a=Math.abs(s),t;
 t=a<60?a+' s':a<3600?Math.round(a/60)+' min':a<172800?Math.round(a/3600)+' h':Math.round(a/86400)+' days';return s<0?f+t:t+' ago';}
function localTimes(){document.querySelectorAll('time[data-ms]').forEach(function(e){var ms=+e.dataset.ms;
 e.textContent=new Date(ms).toLocaleString()+' ('+ago(ms)+')';e.title=new Date(ms).toISOString();});}
localTimes();setInterval(localTimes,30000);
function esc(s){return String(s).replace(/[&<>"]/g,function(c){return{'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;'}[c];});}
var form=document.getElementById('rescale-form');
if(form){var input=document.getElementById('factor-input'),apply=document.getElementById('apply'),plan=document.getElementById('plan'),
 out=document.getElementById('apply-result'),canTrigger=form.dataset.canTrigger==='true';
 input.addEventListener('input',function(){apply.disabled=true;});
 document.getElementById('preview').addEventListener('click',function(){apply.disabled=true;plan.textContent='computing the plan...';
  fetch(form.dataset.planUrl+'?factor='+encodeURIComponent(input.value),{credentials:'same-origin'}).then(function(r){
   return r.json().then(function(d){if(!r.ok)throw new Error(d.detail||r.status);return d;});}).then(function(p){
   if(!p.moves.length){plan.innerHTML='<p>Factor '+p.new_factor+' is the current one: nothing to change.</p>';return;}
   var rows=p.moves.slice(0,500).map(function(m){return'<tr><td>'+esc(m.new_task)+'</td><td>'+esc(m.sspkb)+'</td><td class=num>'+m.offset+
    '</td><td>'+esc(m.from_tasks.join(' + ')||'(new partition)')+'</td><td>'+esc(m.skipping.join(', '))+'</td></tr>';}).join('');
   plan.innerHTML='<p><b>Dry run:</b> factor '+p.old_factor+' &rarr; '+p.new_factor+', '+p.tasks_before+' &rarr; '+p.tasks_after+
    ' virtual tasks'+(p.moves.length>500?' (first 500 of '+p.moves.length+' moves)':'')+'. '+esc(p.notes.join('; '))+'</p>'+
    '<table id=plan-table><tr><th>new virtual task</th><th>SSPKb</th><th class=num>starts at offset</th><th>takes keys of</th><th>already done below</th></tr>'+rows+'</table>';
   apply.disabled=!canTrigger;}).catch(function(e){plan.innerHTML='<p class=failed>Preview failed: '+esc(e.message)+'</p>';});});
 apply.addEventListener('click',function(){apply.disabled=true;out.textContent='triggering '+form.dataset.dag+'...';
  fetch(form.dataset.triggerUrl,{method:'POST',credentials:'same-origin',headers:{'Content-Type':'application/json'},
   body:JSON.stringify({logical_date:null,conf:{job:form.dataset.job,factor:+input.value,dry_run:false},note:'from the elastic job page'})})
  .then(function(r){return r.json().then(function(d){if(!r.ok)throw new Error('Airflow answered '+r.status+': '+(d.detail&&d.detail.message||JSON.stringify(d.detail)));return d;});})
  .then(function(run){var url=form.dataset.runUrl+encodeURIComponent(run.dag_run_id);
   out.innerHTML='Started <a id=run-link href="'+url+'">'+esc(run.dag_run_id)+'</a>: the rescale waits for a running batch, then a data-quality run follows.';})
  .catch(function(e){out.innerHTML='<span class="badge failed">refused</span> '+esc(e.message);apply.disabled=false;});});}
